package permissions

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// vocabulary is what the pending action lets a reply mention: the words of the tool name, the
// argument names and the string values, and the numbers of the arguments.
type vocabulary struct {
	// words holds every word and its stem.
	words map[string]bool
	// toolWords are the words of the tool name ("cancel", "subscription").
	toolWords map[string]bool
	// verb is the first word of the tool name, taken as the action's verb ("book" for
	// book_table).
	verb string
	// riddance: the tool name has a verb of getting rid of something (cancel_subscription,
	// delete_file), so "scrap it" or "call it off" may name the action itself.
	riddance bool
	// numbers holds the canonical numbers of the arguments (see canonicalNumber).
	numbers map[string]bool
	// keysOf maps a word of a string value to the argument names that hold it.
	keysOf map[string][]string
}

// newVocabulary reads the vocabulary of an action. Arguments that are not JSON leave only the
// tool name.
func newVocabulary(a Action) *vocabulary {
	v := &vocabulary{words: map[string]bool{}, toolWords: map[string]bool{}, numbers: map[string]bool{}, keysOf: map[string][]string{}}
	for i, w := range nameWords(a.Tool) {
		if i == 0 {
			v.verb = w
		}
		v.toolWords[w] = true
		v.riddance = v.riddance || riddanceVerbs[w]
		v.addWord(w)
	}
	if len(bytes.TrimSpace(a.Arguments)) == 0 {
		return v
	}
	d := json.NewDecoder(bytes.NewReader(a.Arguments))
	d.UseNumber()
	var args any
	if d.Decode(&args) != nil {
		return v
	}
	v.addValue("", args, 0)
	return v
}

// maxDepth bounds how deep newVocabulary walks nested arguments.
const maxDepth = 16

// maxValueWords: a string argument of more words than this is free text (a message body, a
// note); its words do not become part of the vocabulary, so "yes, and attach the report" is not
// approved because the body happens to say "attached".
const maxValueWords = 6

func (v *vocabulary) addValue(key string, x any, depth int) {
	if depth > maxDepth {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, y := range x {
			for _, w := range nameWords(k) {
				v.addWord(w)
			}
			v.addValue(k, y, depth+1)
		}
	case []any:
		for _, y := range x {
			v.addValue(key, y, depth+1)
		}
	case json.Number:
		v.addNumber(canonicalNumber(x.String()))
	case string:
		v.addString(key, x)
	}
}

// addString adds the words and numbers of a string value, and what a caller may say for them:
// the month and weekday of an ISO date, the 12-hour form of a time, the words of a currency.
func (v *vocabulary) addString(key, s string) {
	u := normalize(notBracketed.Replace(s)) // in a value, "(555)" is not a noise annotation
	if len(u.words) > maxValueWords {
		return // free text, such as the body of an email: a caller does not recite it
	}
	for _, w := range u.words {
		v.addWord(w)
		v.keysOf[w] = append(v.keysOf[w], key)
	}
	for _, n := range u.nums {
		v.addNumber(n.value)
	}
	if len(s) >= 10 {
		if t, err := time.Parse("2006-01-02", s[:10]); err == nil {
			month := strings.ToLower(t.Month().String())
			v.addWord(month)
			v.addWord(month[:3])
			v.addWord(strings.ToLower(t.Weekday().String()))
		}
	}
	for _, g := range currencyGroups {
		for _, w := range g {
			if u.has(w) {
				for _, x := range g {
					v.addWord(x)
				}
				break
			}
		}
	}
}

var notBracketed = strings.NewReplacer("[", " ", "]", " ", "(", " ", ")", " ", "<", " ", ">", " ", "*", " ")

func (v *vocabulary) addWord(w string) {
	v.words[w] = true
	v.words[stem(w)] = true
}

// addNumber adds a number and, for a time, its hour, its 12-hour form, its minutes and the words
// for the time of day ("19:30": "19", "7", "7:30", "30", "pm", "oclock"). An amount with cents
// is only its exact value: "82.4" does not allow "82".
func (v *vocabulary) addNumber(n string) {
	v.numbers[n] = true
	if h, m, ok := strings.Cut(n, ":"); ok {
		v.numbers[h] = true
		v.addWord("oclock")
		hour, err := strconv.Atoi(h)
		switch {
		case err != nil:
		case hour >= 12 && hour < 24:
			v.addWord("pm")
			h12 := strconv.Itoa(hour - 12)
			if hour == 12 {
				h12 = "12"
			}
			v.numbers[h12] = true
			v.numbers[h12+":"+m] = true
		case hour < 12:
			v.addWord("a.m.")
		}
		if m != "00" && m != "0" {
			v.numbers[canonicalNumber(m)] = true
		}
		return
	}
}

// has reports whether the word w (or its stem) belongs to the action.
func (v *vocabulary) has(w string) bool {
	return v.words[w] || v.words[stem(w)]
}

// nameWords splits an identifier into words: "book_flight", "partySize", "from-account".
func nameWords(name string) []string {
	var b strings.Builder
	prev := rune(0)
	for _, r := range name {
		if unicode.IsUpper(r) && unicode.IsLower(prev) {
			b.WriteRune(' ')
		}
		b.WriteRune(r)
		prev = r
	}
	return normalize(b.String()).words
}

// stem removes one common English ending, and a final "e", so that "booking", "books" and
// "book", or "scheduled" and "schedule", compare equal.
func stem(w string) string {
	for _, suffix := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suffix)+2 && strings.HasSuffix(w, suffix) {
			w = strings.TrimSuffix(w, suffix)
			break
		}
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = strings.TrimSuffix(w, "e")
	}
	return w
}
