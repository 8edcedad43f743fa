package permissions

import "strings"

// wordKind is what one word of a reply contributes.
type wordKind uint8

const (
	// kindUnknown: a word the rules do not know, a hedge, a marker, or a number that is not in
	// the arguments.
	kindUnknown wordKind = iota
	// kindNeutral: a function word, a polite word, a generic verb or noun, a word or number of
	// the action.
	kindNeutral
	// kindApproval: part of an approval phrase.
	kindApproval
	// kindRefusal: part of a refusal phrase (every negation is one).
	kindRefusal
)

// analysis is one reply read against one action: the normalized words, the action's vocabulary
// and the kind of every word.
type analysis struct {
	u     *utterance
	v     *vocabulary
	kind  []wordKind
	count [4]int // words per kind
	// numAt maps the first word of each number to it.
	numAt map[int]number
	// refusal caches refuses(): 0 unknown, 1 no, 2 yes.
	refusal int8
	// negatedCallOff: a refusal phrase without a negation of its own is negated in its clause
	// ("do not cancel it", "never stop", "i do not want you to call it off").
	negatedCallOff bool
}

// maxReplyBytes bounds the reply the rules read. A spoken answer to a yes-or-no question is a few
// words; a longer text is held as unclear without being read.
const maxReplyBytes = 2048

func analyze(a Action, reply string) *analysis {
	an := &analysis{u: normalize(reply), v: newVocabulary(a), numAt: map[int]number{}}
	for _, n := range an.u.nums {
		an.numAt[n.start] = n
	}
	an.classify()
	return an
}

// classify covers the words from left to right with the longest approval, refusal or neutral
// phrase that starts at each position (on equal length a refusal wins over an approval, and an
// approval over a neutral phrase); a negated approval phrase counts as a refusal (negatedAt); a
// refusal phrase that calls the request off ("cancel it", "stop"), negated in its clause, is a
// double negation (negatedCallOff); a number covers its words. What no phrase covers is neutral
// if it is a neutral word or a word of the action, and unknown otherwise.
func (an *analysis) classify() {
	words := an.u.words
	an.kind = make([]wordKind, len(words))
	for i := 0; i < len(words); {
		if n, ok := an.numAt[i]; ok {
			k := kindUnknown
			if an.v.numbers[n.value] {
				k = kindNeutral
			}
			i = an.mark(i, n.end-n.start, k)
			continue
		}
		best, k := an.v.refusalAt(words, i), kindRefusal
		if p := approvalPhrases.at(words, i); len(p) > len(best) {
			best, k = p, kindApproval
		}
		if p := neutralPhrases.at(words, i); len(p) > len(best) {
			best, k = p, kindNeutral
		}
		if best != nil {
			switch {
			case k == kindApproval && negatedAt(words, i):
				k = kindRefusal // "not approved", "do not go ahead", "never confirm"
			case k == kindRefusal && !hasNegation(best) && an.negatedInClause(i):
				an.negatedCallOff = true // "do not cancel it": the caller may want the action
			}
			i = an.mark(i, len(best), k)
			continue
		}
		k = kindUnknown
		if neutralWords[words[i]] || an.v.has(words[i]) {
			k = kindNeutral
		}
		i = an.mark(i, 1, k)
	}
}

// negatedAt reports whether the approval phrase at words[i] is negated: right after "not" or
// "never", or after "not want ... to" ("i do not want you to do that").
func negatedAt(words []string, i int) bool {
	if i > 0 && (words[i-1] == "not" || words[i-1] == "never") {
		return true
	}
	if i == 0 || words[i-1] != "to" {
		return false
	}
	for j := i - 2; j >= 1 && j >= i-4; j-- {
		if wantVerbs[words[j]] && words[j-1] == "not" {
			return true
		}
		if words[j] != "you" && words[j] != "me" && words[j] != "them" {
			return false
		}
	}
	return false
}

// negatedInClause is negatedAt for a phrase at words[i], looking back only within its clause:
// "do not cancel it" is negated, "absolutely not, cancel that" is not.
func (an *analysis) negatedInClause(i int) bool {
	start := i
	for start > 0 && an.u.clause[start-1] == an.u.clause[i] {
		start--
	}
	return negatedAt(an.u.words[start:], i-start)
}

func (an *analysis) mark(i, n int, k wordKind) int {
	for j := i; j < i+n; j++ {
		an.kind[j] = k
		an.count[k]++
	}
	return i + n
}

// refusalAt returns the longest refusal phrase at words[i], except that a phrase without a
// negation whose first word names the action ("cancel it" for cancel_subscription) is the action
// itself, not a refusal; nor is a riddance phrase ("scrap it", "call it off") against an action
// that gets rid of something (delete_file, cancel_subscription).
func (v *vocabulary) refusalAt(words []string, i int) []string {
	var best []string
	for _, f := range refusalPhrases.byFirst[words[i]] {
		if len(f) <= len(best) || i+len(f) > len(words) || !equalWords(words[i:i+len(f)], f) {
			continue
		}
		if v.toolWords[f[0]] && !hasNegation(f) {
			continue
		}
		if v.riddance && riddancePhrases[strings.Join(f, " ")] {
			continue
		}
		best = f
	}
	return best
}

func hasNegation(words []string) bool {
	for _, w := range words {
		if negations[w] {
			return true
		}
	}
	return false
}

// approves reports whether the reply is a clear approval: at least one approval phrase and
// nothing but neutral words besides.
func (an *analysis) approves() bool {
	return an.count[kindApproval] > 0 && an.count[kindRefusal] == 0 && an.count[kindUnknown] == 0
}

// refuses reports whether the reply is a clean refusal: no approval phrase anywhere, a first
// clause made of refusal phrases and neutral words only, without a hedge, a condition or a
// sarcasm marker, no double negation ("not a no", "do not cancel it") and no order to run the
// action after all ("scrap that, book it"). Later clauses may hold words the rules do not know
// ("no, leave the door locked").
func (an *analysis) refuses() bool {
	if an.refusal == 0 {
		an.refusal = 1
		if an.cleanRefusal() {
			an.refusal = 2
		}
	}
	return an.refusal == 2
}

func (an *analysis) cleanRefusal() bool {
	if an.count[kindApproval] > 0 || an.count[kindRefusal] == 0 || an.negatedCallOff || an.ordersAction() {
		return false
	}
	from, to := an.u.firstClause()
	first := an.u.words[from:to]
	for _, qualifier := range []*phraseList{hedgePhrases, conditionPhrases, sarcasmPhrases} {
		if i, _ := qualifier.find(first); i >= 0 {
			return false // "i am not sure", "not if it is cheap"
		}
	}
	refusal := false
	for i := from; i < to; i++ {
		switch an.kind[i] {
		case kindUnknown:
			if !refusalNeutral[an.u.words[i]] {
				return false
			}
		case kindRefusal:
			refusal = true
		}
	}
	words := an.u.words
	for i, w := range words {
		if w != "not" {
			continue
		}
		for j := i + 1; j < len(words) && j <= i+2; j++ {
			if negations[words[j]] {
				return false
			}
		}
	}
	return refusal
}

// ordersAction reports whether the action's verb, not negated, opens a clause or follows a
// refusal phrase: "scrap that, book it", "never mind, just book it", "no book it", "no, book two
// instead". After a refusal that is a correction (perhaps with changed arguments), not a
// refusal. "No, I'll book it myself" and "no, don't book it" do not order the action.
func (an *analysis) ordersAction() bool {
	words := an.u.words
	for i, w := range words {
		if w != an.v.verb || an.kind[i] == kindRefusal || an.negatedInClause(i) {
			continue
		}
		j := i - 1
		for j >= 0 && an.u.clause[j] == an.u.clause[i] && verbOpeners[words[j]] {
			j--
		}
		if j < 0 || an.u.clause[j] != an.u.clause[i] || an.kind[j] == kindRefusal {
			return true
		}
	}
	return false
}

// covered reports whether words[i:i+n] are all part of approval or refusal phrases.
func (an *analysis) covered(i, n int) bool {
	for j := i; j < i+n; j++ {
		if an.kind[j] != kindApproval && an.kind[j] != kindRefusal {
			return false
		}
	}
	return true
}
