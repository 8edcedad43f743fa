package permissions

import (
	"strings"
	"unicode"
)

// utterance is a reply after normalization: lowercase words with contractions expanded, ASR
// spellings fixed, fillers and noise annotations removed, and the facts about the raw text that
// the words no longer show.
type utterance struct {
	// words are the normalized words, in order.
	words []string
	// clause is the clause index of each word; clauses are separated by punctuation.
	clause []int
	// nums are the numbers the words express.
	nums []number
	// question: a question mark anywhere in the reply.
	question bool
	// quoted: double quotes, or single quotes around a word.
	quoted bool
	// machine: characters that belong to markup or code rather than speech ({ } < > | # ` =).
	machine bool
	// annotations are the texts of bracketed annotations such as [noise], (inaudible), <unk> or
	// *cough*, which transcribers insert for what was not speech or not understood.
	annotations []string
}

// Apostrophes, quotes and dashes as they come out of keyboards, ASR engines and word processors.
var unifyChars = strings.NewReplacer(
	"\u2019", "'", "\u2018", "'", "\u02bc", "'", "\u02b9", "'", "\u00b4", "'", "`", "'",
	"\u2032", "'", "\uff07", "'", "\u201b", "'",
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u201f", `"`, "\u00ab", `"`, "\u00bb", `"`,
	"\u2033", `"`, "\uff02", `"`, "\u2039", `"`, "\u203a", `"`,
	"\u2013", " - ", "\u2014", " - ", "\u2012", " - ", "\u2015", " - ", "\u2026", "...",
	"o.k.", "ok", "o.k", "ok", "a.m.", "am", "p.m.", "pm",
)

// questionMarks are the characters that end a question in the scripts a transcript may use.
const questionMarks = "?\u00bf\uff1f\u037e\u061f\u2e2e"

// normalize turns a raw reply into an utterance.
func normalize(reply string) *utterance {
	u := &utterance{}
	s := unifyChars.Replace(strings.ToLower(reply))
	u.question = strings.ContainsAny(s, questionMarks)
	u.quoted = strings.Contains(s, `"`)
	s = u.extractAnnotations(s)
	u.machine = strings.ContainsAny(s, "{}<>|#`=\\")
	raw := u.scan(s)
	u.words, u.clause = expand(raw)
	u.removeFillers()
	u.nums = findNumbers(u.words)
	return u
}

// annotationPairs are the brackets transcribers put around non-speech.
var annotationPairs = map[rune]rune{'[': ']', '(': ')', '<': '>', '*': '*'}

// extractAnnotations removes bracketed annotations from s, records their text and leaves a
// clause boundary in their place. An unclosed bracket annotates the rest of the reply.
func (u *utterance) extractAnnotations(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		end, ok := annotationPairs[rs[i]]
		if !ok {
			b.WriteRune(rs[i])
			continue
		}
		j := i + 1
		for j < len(rs) && rs[j] != end {
			j++
		}
		u.annotations = append(u.annotations, strings.TrimSpace(string(rs[i+1:min(j, len(rs))])))
		b.WriteString(" . ")
		i = j
	}
	return b.String()
}

// rawWord is one word as scanned, before contractions are expanded.
type rawWord struct {
	text   string
	clause int
	// glued: no separator between this word and the previous one (as in "15th" or "4pm").
	glued bool
}

// symbolWords are symbols that are spoken as words.
var symbolWords = map[rune]string{'$': "dollars", '€': "euros", '£': "pounds", '¥': "yen", '%': "percent", '&': "and", '+': "plus"}

// scan splits s into words and clauses. Letters and digits make words (a change between letters
// and digits starts a new glued word); an apostrophe between letters stays inside a word; a
// period, comma or colon between digits stays inside a number; other punctuation ends a clause.
func (u *utterance) scan(s string) []rawWord {
	rs := []rune(s)
	var out []rawWord
	var cur []rune
	clause, clauseUsed, glued := 0, false, false
	isDigit := func(r rune) bool { return r >= '0' && r <= '9' }
	at := func(i int) rune {
		if i < 0 || i >= len(rs) {
			return ' '
		}
		return rs[i]
	}
	flush := func() {
		if len(cur) > 0 {
			out = append(out, rawWord{text: string(cur), clause: clause, glued: glued})
			clauseUsed = true
			cur = cur[:0]
		}
		glued = false
	}
	boundary := func() {
		flush()
		if clauseUsed {
			clause++
			clauseUsed = false
		}
	}
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if last := at(i - 1); len(cur) > 0 && (unicode.IsLetter(last) && isDigit(r) || (isDigit(last) || last == ':' || last == '.' || last == ',') && !isDigit(r)) {
				// A change between letters and digits ("4pm", "q3", "15th") starts a new word.
				flush()
				glued = true
			}
			cur = append(cur, r)
		case r == '\'':
			switch {
			case len(cur) > 0 && unicode.IsLetter(at(i+1)):
				cur = append(cur, r)
			case len(cur) == 0 && unicode.IsLetter(at(i+1)):
				u.quoted = true // an opening quote: 'yes
			case len(cur) > 0 && cur[len(cur)-1] != 's':
				u.quoted = true // a closing quote: yes' (but not a plural possessive: kids')
				flush()
			default:
				flush()
			}
		case (r == '.' || r == ',' || r == ':') && len(cur) > 0 && isDigit(cur[len(cur)-1]) && isDigit(at(i+1)):
			cur = append(cur, r)
		case r == '-' || r == '.' || r == '@' || r == '/' || r == '_':
			// Inside a word ("old-draft.txt", "bob@example.com") these only separate words.
			if unicode.IsLetter(at(i-1)) || unicode.IsDigit(at(i-1)) {
				if unicode.IsLetter(at(i+1)) || unicode.IsDigit(at(i+1)) {
					flush()
					continue
				}
			}
			if r == '-' || r == '.' {
				boundary()
			} else {
				flush()
			}
		case unicode.IsSpace(r):
			flush()
		case symbolWords[r] != "":
			flush()
			out = append(out, rawWord{text: symbolWords[r], clause: clause})
			clauseUsed = true
		case unicode.Is(unicode.So, r):
			// An emoji or pictograph means something ("👎") the rules cannot read.
			flush()
			out = append(out, rawWord{text: "<symbol>", clause: clause})
			clauseUsed = true
		default:
			boundary()
		}
	}
	flush()
	return out
}

// expand expands contractions and fixes ASR spellings, word by word, then applies the phrase
// rewrites. It returns the words and their clause indices.
func expand(raw []rawWord) ([]string, []int) {
	var words []string
	var clause []int
	for i, w := range raw {
		if i > 0 && startsWithDigit(raw[i-1].text) {
			if w.glued && ordinalSuffixes[w.text] && isDigits(raw[i-1].text) {
				continue // "15th" is the number 15
			}
			if x, ok := numberSuffixes[w.text]; ok && (w.glued || x == "a.m.") {
				words = append(words, x) // "25k" is 25 thousand; "3 am" is a time
				clause = append(clause, w.clause)
				continue
			}
		}
		for _, x := range expandWord(collapseRuns(w.text)) {
			words = append(words, x)
			clause = append(clause, w.clause)
		}
	}
	return rewritePhrases(words, clause)
}

var (
	ordinalSuffixes = map[string]bool{"st": true, "nd": true, "rd": true, "th": true}
	// numberSuffixes after a number: "25k", "2m", "3am" (also "3 am", where "am" is not the verb).
	numberSuffixes = map[string]string{"k": "thousand", "m": "million", "bn": "billion", "am": "a.m."}
)

// collapseRuns shortens runs of three or more identical letters to one ("yesss", "noooo").
func collapseRuns(w string) string {
	rs := []rune(w)
	out := rs[:0:0]
	for i := 0; i < len(rs); i++ {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[i] {
			j++
		}
		if j-i+1 >= 3 && unicode.IsLetter(rs[i]) {
			out = append(out, rs[i])
		} else {
			out = append(out, rs[i:j+1]...)
		}
		i = j
	}
	return string(out)
}

// expandWord expands one word: contractions with or without their apostrophe, possessives and
// ASR spellings. The only apostrophe left is the word "'s" after a noun, which may be a
// possessive or "is".
func expandWord(w string) []string {
	if x, ok := spellings[w]; ok {
		return strings.Fields(x)
	}
	if !strings.Contains(w, "'") {
		return []string{w}
	}
	if x, ok := contractions[w]; ok {
		return strings.Fields(x)
	}
	switch {
	case strings.HasSuffix(w, "n't"):
		return append(expandWord(strings.TrimSuffix(w, "n't")), "not")
	case strings.HasSuffix(w, "'s"):
		base := strings.TrimSuffix(w, "'s")
		if isWords[base] {
			return append(expandWord(base), "is")
		}
		return append(expandWord(base), "'s") // possessive ("luigi's") or "is" ("dana's fine")
	}
	for suffix, full := range contractionSuffixes {
		if strings.HasSuffix(w, suffix) {
			return append(expandWord(strings.TrimSuffix(w, suffix)), full)
		}
	}
	return expandWord(strings.ReplaceAll(w, "'", ""))
}

// removeFillers drops filler words, and clauses that consist only of "like" or "you know".
func (u *utterance) removeFillers() {
	// The filler clauses are at most two words long; longer clauses need not be remembered.
	const longest = 2
	clauseWords := map[int][]string{}
	for i, w := range u.words {
		if c := u.clause[i]; !fillers[w] && len(clauseWords[c]) <= longest {
			clauseWords[c] = append(clauseWords[c], w)
		}
	}
	words, clause := u.words[:0:0], u.clause[:0:0]
	for i, w := range u.words {
		if cw := clauseWords[u.clause[i]]; fillers[w] || (len(cw) <= longest && fillerClauses[strings.Join(cw, " ")]) {
			continue
		}
		words = append(words, w)
		clause = append(clause, u.clause[i])
	}
	u.words, u.clause = words, clause
}

// rewritePhrases applies the multi-word rewrites ("go a head" → "go ahead").
func rewritePhrases(words []string, clause []int) ([]string, []int) {
	var ow []string
	var oc []int
	for i := 0; i < len(words); i++ {
		n, repl := 0, ""
		for from, to := range phraseRewrites {
			f := strings.Fields(from)
			if len(f) > n && i+len(f) <= len(words) && equalWords(words[i:i+len(f)], f) {
				n, repl = len(f), to
			}
		}
		if n == 0 {
			ow, oc = append(ow, words[i]), append(oc, clause[i])
			continue
		}
		for _, x := range strings.Fields(repl) {
			ow, oc = append(ow, x), append(oc, clause[i])
		}
		i += n - 1
	}
	return ow, oc
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// firstClause returns the words of the first clause that has any.
func (u *utterance) firstClause() (from, to int) {
	if len(u.words) == 0 {
		return 0, 0
	}
	to = 1
	for to < len(u.words) && u.clause[to] == u.clause[0] {
		to++
	}
	return 0, to
}

// has reports whether w is one of the words.
func (u *utterance) has(w string) bool {
	for _, x := range u.words {
		if x == w {
			return true
		}
	}
	return false
}

// clauseStart reports whether word i begins its clause.
func (u *utterance) clauseStart(i int) bool {
	return i == 0 || u.clause[i] != u.clause[i-1]
}
