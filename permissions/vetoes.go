package permissions

import "github.com/backchannel-io/backchannel/jobs"

// vetoRule is one named reason why a reply cannot be an approval.
type vetoRule struct {
	reason  string
	verdict jobs.Verdict
	match   func(an *analysis) bool
}

// vetoRules are tried in order; the first that matches gives the judgement. All of them hold,
// except the clean refusal, which declines. It comes after the vetoes that make even a "no"
// unreliable (silence, instructions, cut-off or partly inaudible replies, hypotheticals, reported
// speech, questions) and before the ones that only qualify an answer: "no, maybe later" and
// "no, I'll do it myself" decline.
var vetoRules = []vetoRule{
	{ReasonEmpty, jobs.Hold, isEmpty},
	{ReasonInstruction, jobs.Hold, addressesSystem},
	{ReasonIncomplete, jobs.Hold, isIncomplete},
	{ReasonNoise, jobs.Hold, hasNoise},
	{ReasonHypothetical, jobs.Hold, isHypothetical},
	{ReasonReportedSpeech, jobs.Hold, reportsSpeech},
	{ReasonQuestion, jobs.Hold, asksQuestion},
	{ReasonRefusal, jobs.Decline, (*analysis).refuses},
	{ReasonCondition, jobs.Hold, setsCondition},
	{ReasonSarcasm, jobs.Hold, isSarcastic},
	{ReasonAmbiguous, jobs.Hold, hedges},
	{ReasonChangedArguments, jobs.Hold, changesArguments},
	{ReasonCondition, jobs.Hold, qualifies},
	{ReasonNegation, jobs.Hold, negates},
}

// Veto runs the vetoes of the rule-based verifier on a reply to the pending action a. When one
// applies it returns its judgement and true: hold with the veto's reason, or decline with
// ReasonRefusal when the reply is a clear refusal. The judgement is never an approval. A reply no
// veto applies to may still not be an approval (Verify holds what it does not understand); the
// vetoes are what no verifier may approve. A reply longer than 2 KiB is vetoed as unclear.
func (r *Rules) Veto(a Action, reply string) (Judgement, bool) {
	if len(reply) > maxReplyBytes {
		return Judgement{Verdict: jobs.Hold, Reason: ReasonUnclear}, true
	}
	return analyze(a, reply).veto()
}

func (an *analysis) veto() (Judgement, bool) {
	for _, rule := range vetoRules {
		if rule.match(an) {
			return Judgement{Verdict: rule.verdict, Reason: rule.reason}, true
		}
	}
	return Judgement{}, false
}

// isEmpty: nothing but silence, punctuation, fillers and annotations.
func isEmpty(an *analysis) bool { return len(an.u.words) == 0 }

// hasNoise: an annotation ("[inaudible]", "[laughter]") next to words: part of the reply was not
// speech or was not understood.
func hasNoise(an *analysis) bool { return len(an.u.annotations) > 0 }

// addressesSystem: markup, or words that talk to or about the system, the assistant, its rules
// or its verdicts, also inside an annotation ("[system] ...").
func addressesSystem(an *analysis) bool {
	if an.u.machine || an.found(instructionPhrases, true, true) {
		return true
	}
	for _, a := range an.u.annotations {
		if i, _ := instructionPhrases.find(normalize(a).words); i >= 0 {
			return true
		}
	}
	return false
}

// reportsSpeech: quotes; a speech verb or another person ("my wife said yes"); a person or thing
// of the arguments as the subject ("dana is fine with it", "dana's fine"). A reply that opens
// with the caller's own clean refusal ("no, I'll tell her myself", "i said no") is not reported
// speech: it declines.
func reportsSpeech(an *analysis) bool {
	if an.u.quoted {
		return true
	}
	if an.refuses() {
		return false
	}
	words := an.u.words
	for i := 0; i < len(words); i++ {
		if firstPersonSpeech.at(words, i) != nil {
			return true // "i said yes" may answer another question
		}
		if f := reportedPhrases.at(words, i); f != nil && !an.covered(i, len(f)) && !(len(f) == 1 && an.v.has(f[0])) {
			return true
		}
		if an.thirdPersonSubject(i) {
			return true
		}
	}
	return false
}

// thirdPersonSubject reports whether words[i], a word of a string argument, is the subject of
// the clause: followed by "is", "says", "wants"..., or by "'s" and an approval ("dana's fine").
func (an *analysis) thirdPersonSubject(i int) bool {
	words := an.u.words
	w := words[i]
	if len(an.v.keysOf[w]) == 0 || neutralWords[w] || an.startsNumber(i) || an.kind[i] == kindApproval || i+1 >= len(words) {
		return false
	}
	if thirdPersonVerbs[words[i+1]] {
		return true
	}
	return words[i+1] == "'s" && i+2 < len(words) && an.kind[i+2] == kindApproval
}

// asksQuestion: a question mark; a clause that opens with a question word or with an
// auxiliary and its subject ("is it", "can you"; but "do it" is an order); a question word
// followed by an auxiliary anywhere ("yes what time is it").
func asksQuestion(an *analysis) bool {
	if an.u.question {
		return true
	}
	words := an.u.words
	for i, w := range words {
		next := ""
		if i+1 < len(words) && an.u.clause[i+1] == an.u.clause[i] {
			next = words[i+1]
		}
		if whWords[w] && (an.u.clauseStart(i) || whFollowers[next]) {
			return true
		}
		if an.u.clauseStart(i) && auxiliaries[w] && subjects[next] {
			if w == "do" && !personSubjects[next] {
				continue // "do it", "do that": an order
			}
			return true
		}
	}
	return false
}

// personSubjects are the subjects after which "do" asks a question ("do you", not "do it").
var personSubjects = wordSet("i you we they he she anyone someone anybody")

// isHypothetical: "would", "could", "might", "what if", "suppose", "in theory" — except inside an
// approval or refusal phrase ("that would be great", "i would rather not").
func isHypothetical(an *analysis) bool { return an.found(hypotheticalPhrases, true, false) }

// setsCondition: "if", "only", "unless", "as long as", "once", "after", ...
func setsCondition(an *analysis) bool { return an.found(conditionPhrases, false, false) }

// qualifies: "but", "except", "though", "however".
func qualifies(an *analysis) bool { return an.found(qualifierPhrases, false, false) }

// isSarcastic: a sarcasm marker ("whatever", "oh great", "as if", "lol"), "yeah right" (but not
// "yeah right away"), or an approval followed by a final "not".
func isSarcastic(an *analysis) bool {
	if an.found(sarcasmPhrases, false, false) {
		return true
	}
	words := an.u.words
	for i := 0; i+1 < len(words); i++ {
		if yesWords[words[i]] && words[i+1] == "right" && (i+2 == len(words) || !rightAfter[words[i+2]]) {
			return true
		}
	}
	// "yes... not", "great idea. not": a final "not" that negates no verb of its own.
	n := len(words)
	return n > 1 && words[n-1] == "not" && !auxiliaries[words[n-2]] && words[n-2] != "must" && an.count[kindApproval] > 0
}

var (
	yesWords   = wordSet("yes yeah yep yup sure ok okay")
	rightAfter = wordSet("away now there here")
)

// hedges: "maybe", "i guess", "i think", "hmm", "wait", "or", "not sure", ...
func hedges(an *analysis) bool { return an.found(hedgePhrases, false, false) }

// changesArguments: a change word ("instead", "make it", "add", "without"); a number, a value
// word (a day, a size, a currency) or, after a preposition, a word that is not in the action; a
// value put in the place of another ("from savings" when savings is the destination); an unknown
// word after "and" or "then" (another action: "yes and attach the report"); a restriction of the
// action to part of it ("just pepperoni").
func changesArguments(an *analysis) bool {
	if an.found(changeMarkers, true, true) {
		return true
	}
	for _, n := range an.u.nums {
		if !an.v.numbers[n.value] {
			return true
		}
	}
	words := an.u.words
	for i, w := range words {
		if valueWords[w] && !an.v.has(w) {
			return true
		}
		if !prepositions[w] || an.covered(i, 1) {
			continue
		}
		j := i + 1
		for j < len(words) && an.u.clause[j] == an.u.clause[i] && prepositionSkip[words[j]] {
			j++
		}
		if j == len(words) || an.u.clause[j] != an.u.clause[i] {
			continue
		}
		if an.kind[j] == kindUnknown && !an.infinitive(w, j) || an.v.swapped(w, words[j]) {
			return true
		}
		if partyPrepositions[w] && personPronouns[words[j]] && !an.v.has(words[j]) {
			return true
		}
	}
	for i := 0; i+1 < len(words); i++ {
		if joiners[words[i]] {
			j := i + 1
			for j < len(words) && joinerSkip[words[j]] {
				j++
			}
			if j < len(words) && an.kind[j] == kindUnknown && !an.startsNumber(j) {
				return true // "yes and attach the report", "then email bob"
			}
		}
		if restrictors[words[i]] && an.kind[i+1] != kindApproval && !an.v.toolWords[words[i+1]] &&
			(an.v.has(words[i+1]) || an.startsNumber(i+1) || valueWords[words[i+1]]) {
			return true
		}
	}
	return false
}

// infinitive reports whether words[j], after the preposition prep, is rather a verb after the
// infinitive "to": it is followed by its object ("happy for you to get those").
func (an *analysis) infinitive(prep string, j int) bool {
	words := an.u.words
	return prep == "to" && j+1 < len(words) && an.u.clause[j+1] == an.u.clause[j] && objectStarts[words[j+1]]
}

// objectStarts begin the object of a verb.
var objectStarts = wordSet("the a an it them that this those these my your our me us him her")

// startsNumber reports whether a number starts at words[i].
func (an *analysis) startsNumber(i int) bool {
	_, ok := an.numAt[i]
	return ok
}

// isIncomplete: the reply ends on a word that needs more ("yes and", "go ahead with the"): the
// transcript was cut, or the caller was about to add something.
func isIncomplete(an *analysis) bool {
	words := an.u.words
	n := len(words)
	if n == 0 || !trailingWords[words[n-1]] {
		return false
	}
	// "i do not want to", "we have to": a verb stands in for the action.
	return !(words[n-1] == "to" && n > 1 && (wantVerbs[words[n-2]] || toVerbs[words[n-2]]))
}

// toVerbs take "to" and a verb that may be left out ("i have to", "i am going to").
var toVerbs = wordSet("have going got ought used")

// swapped reports whether value, said after the preposition "from" or "to" (or "into", "onto"),
// belongs only to arguments named for the other direction ("from savings" when savings is the
// to_account).
func (v *vocabulary) swapped(prep, value string) bool {
	if prep == "into" || prep == "onto" {
		prep = "to"
	}
	other := map[string]string{"from": "to", "to": "from"}[prep]
	if other == "" {
		return false
	}
	keys := v.keysOf[value]
	if len(keys) == 0 {
		return false
	}
	mentionsOther := false
	for _, k := range keys {
		for _, w := range nameWords(k) {
			if w == prep {
				return false
			}
			if w == other {
				mentionsOther = true
			}
		}
	}
	return mentionsOther
}

// negates: any refusal phrase, including any negation word, in a reply that is not a clean
// refusal ("yes, don't", "not yet", "yes no").
func negates(an *analysis) bool { return an.count[kindRefusal] > 0 }

// found reports whether a phrase of p occurs in the reply. With uncovered, a match inside an
// approval or refusal phrase does not count. With exempt, a one-word match that is a word of
// the action does not count ("system" for restart_system).
func (an *analysis) found(p *phraseList, uncovered, exempt bool) bool {
	words := an.u.words
	for i := range words {
		f := p.at(words, i)
		if f == nil {
			continue
		}
		if uncovered && an.covered(i, len(f)) {
			continue
		}
		if exempt && len(f) == 1 && an.v.has(f[0]) {
			continue
		}
		return true
	}
	return false
}
