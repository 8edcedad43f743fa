package permissions

import "strings"

// This file holds the word and phrase tables of the rule-based verifier. Phrases are written in
// normalized form: lowercase, contractions expanded ("do not", "that is", "let us", "i would").

// phraseList is a set of phrases, each a sequence of normalized words.
type phraseList struct {
	byFirst map[string][][]string
}

func phrases(ss ...string) *phraseList {
	p := &phraseList{byFirst: map[string][][]string{}}
	for _, s := range ss {
		f := strings.Fields(s)
		p.byFirst[f[0]] = append(p.byFirst[f[0]], f)
	}
	return p
}

// at returns the longest phrase that starts at words[i] (nil if none).
func (p *phraseList) at(words []string, i int) []string {
	var best []string
	for _, f := range p.byFirst[words[i]] {
		if len(f) > len(best) && i+len(f) <= len(words) && equalWords(words[i:i+len(f)], f) {
			best = f
		}
	}
	return best
}

// find returns the position of the first phrase in words (-1 if none) and the phrase.
func (p *phraseList) find(words []string) (int, []string) {
	for i := range words {
		if f := p.at(words, i); f != nil {
			return i, f
		}
	}
	return -1, nil
}

// phraseSet is a set of whole phrases, keyed by their words joined with single spaces.
func phraseSet(ss ...string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[strings.Join(strings.Fields(s), " ")] = true
	}
	return m
}

func wordSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// Normalization tables.
var (
	// spellings are ASR and chat spellings of one word, and contractions written without their
	// apostrophe.
	spellings = map[string]string{
		"yess": "yes", "yea": "yeah", "yeh": "yeah", "ya": "yeah", "yah": "yeah", "yeap": "yep",
		"yas": "yes", "yis": "yes", "yesh": "yes", "okey": "okay", "okie": "okay", "okk": "ok",
		"kay": "okay", "kk": "ok", "alrighty": "alright", "aight": "alright",
		"allright": "alright", "goahead": "go ahead", "plz": "please", "pls": "please",
		"thx": "thanks", "ty": "thanks", "righto": "right", "mmhm": "mhm", "mmhmm": "mhm",
		"nevermind": "never mind", "noo": "no", "nop": "nope",
		"ma'am": "maam", "o'clock": "oclock", "y'all": "you", "idk": "i do not know",
		"dont": "do not", "doesnt": "does not", "didnt": "did not", "cant": "can not",
		"cannot": "can not", "wont": "will not", "isnt": "is not", "arent": "are not",
		"wasnt": "was not", "werent": "were not", "shouldnt": "should not",
		"wouldnt": "would not", "couldnt": "could not", "havent": "have not", "hasnt": "has not",
		"hadnt": "had not", "aint": "is not", "mustnt": "must not", "neednt": "need not",
		"shant": "shall not", "thats": "that is", "whats": "what is", "lets": "let us",
		"its": "it is", "im": "i am", "ive": "i have", "youre": "you are", "theyre": "they are",
		"theres": "there is", "heres": "here is", "hows": "how is", "wheres": "where is",
		"whos": "who is", "thatll": "that will", "itll": "it will", "gonna": "going to",
		"wanna": "want to", "gotta": "got to", "dunno": "do not know",
	}
	// contractions are the irregular contractions.
	contractions = map[string]string{
		"can't": "can not", "won't": "will not", "shan't": "shall not", "ain't": "is not",
		"let's": "let us", "n't": "not", "'tis": "it is",
	}
	// contractionSuffixes are the regular contraction endings.
	contractionSuffixes = map[string]string{"'re": "are", "'ve": "have", "'ll": "will", "'d": "would", "'m": "am"}
	// isWords take "'s" as "is" rather than as a possessive.
	isWords = wordSet("it that what there here he she who how where when why this everything nothing something everyone someone")
	// phraseRewrites fix words that ASR splits or joins.
	phraseRewrites = map[string]string{
		"go a head": "go ahead", "go ahed": "go ahead", "all right": "alright",
		"okey dokey": "okay", "okay dokey": "okay", "okay dokie": "okay", "okey doke": "okay",
		"o k": "ok", "of coarse": "of course", "sure ting": "sure thing", "ok ay": "okay",
		"uh huh": "uhhuh", "mm hmm": "mhm", "mm hm": "mhm", "m hm": "mhm", "uh hum": "uhhuh",
	}
	// fillers carry no meaning and are dropped.
	fillers = wordSet("uh uhh uhm um umm er erm ah ahh")
	// fillerClauses are dropped when they make a clause on their own ("like, yes").
	fillerClauses = wordSet("like") // see init for "you know"
)

func init() {
	fillerClauses["you know"] = true
}

// Classification tables.
var (
	// approvalPhrases authorize. A reply is approved only if it contains one of them and nothing
	// else but neutral words.
	approvalPhrases = phrases(
		"yes", "yeah", "yep", "yup", "aye", "ok", "okay", "sure", "sure thing", "certainly",
		"absolutely", "definitely", "of course", "affirmative", "affirm", "correct",
		"that is correct", "that is right", "right", "exactly", "indeed", "go ahead",
		"go for it", "go on", "do it", "do that", "do so", "please do", "i do", "proceed",
		"confirm", "confirmed", "i confirm", "approve", "approved", "i approve", "authorize",
		"authorized", "agreed", "i agree", "agree", "sounds good", "sounds great",
		"sounds perfect", "sounds fine", "fine", "that is fine", "it is fine", "that works",
		"works", "works for me", "perfect", "great", "good", "alright", "let us do it",
		"let us do that", "let us go", "make it happen", "make it so", "you bet",
		"by all means", "will do", "right away", "would like that", "would like it",
		"would love that", "would love it", "would appreciate that", "would appreciate it",
		"much appreciated", "appreciated", "lovely", "wonderful", "excellent", "awesome",
		"brilliant", "cool", "fantastic", "would be great", "would be perfect",
		"would be fine", "would be good", "would be lovely", "would be wonderful",
		"would be nice", "would be helpful", "would be brilliant", "would be awesome",
		"would be ideal", "would be excellent", "you have my permission", "you have my approval",
		"you have my consent", "you have my blessing", "permission granted", "i give my consent",
		"i give my permission", "i give you permission", "that is what i want",
		"exactly what i want", "i am certain", "the answer is yes", "my answer is yes",
		"i am happy with that", "i am happy with it", "i am fine with that", "i am fine with it",
		"i am good with that", "i am good with it", "i am ok with that", "i am ok with it",
		"i am okay with that", "i am okay with it", "go right ahead", "sounds about right",
		"sounds right", "roger that",
	)
	// refusalPhrases refuse. Every negation word is one of them, so a negation anywhere is
	// visible to the negation veto.
	refusalPhrases = phrases(
		"no", "not", "nope", "nah", "nay", "never", "negative", "none", "nothing", "neither",
		"nor", "nobody", "no thanks", "no thank you", "no way", "no chance", "not a chance",
		"hell no", "absolutely not", "definitely not", "certainly not", "of course not",
		"not at all", "not now", "not today", "do not", "please do not", "do not do it",
		"do not do that", "do not bother", "do not you dare", "do not do anything", "cancel",
		"cancel that", "cancel it", "stop", "stop it", "abort", "halt", "quit", "never mind",
		"forget it", "forget that", "forget this", "forget about it", "forget about that",
		"forget about this", "scratch that", "scrap", "drop it", "drop that", "call it off",
		"call that off", "call this off", "call off", "decline", "declined", "refuse",
		"reject", "rejected", "denied", "deny", "leave it", "keep it", "skip it", "i am good",
		"i am fine", "i am okay", "i am ok", "i would rather not", "rather not",
		"changed my mind", "that is wrong", "wrong", "not approved", "not approve",
		"do not approve", "not authorized", "do not authorize", "not ok", "not okay",
		"not fine", "not good", "not correct", "not right", "do not want", "i do not",
		"not interested", "not this time", "definitely do not", "absolutely do not",
		"certainly do not", "really do not", "seriously do not", "definitely never",
	)
	// riddancePhrases are refusal phrases that can also name an action that gets rid of
	// something: "scrap it" may mean "delete it", "call it off" "cancel it". Against such an
	// action (see riddanceVerbs) they are not refusals; for any other action they call the
	// request off.
	riddancePhrases = phraseSet("scrap", "drop it", "drop that", "call it off", "call that off", "call this off", "call off")
	// riddanceVerbs in a tool name make it an action that gets rid of something.
	riddanceVerbs = wordSet(`cancel delete remove erase discard drop scrap trash ditch terminate end
		unsubscribe close revoke clear purge wipe destroy uninstall kill`)
	// negations are the words that make any reply containing them not an approval.
	negations = wordSet("no not nope nah nay never negative none nothing neither nor nobody")
	// neutralPhrases are harmless next to an approval or a refusal; they neither approve nor
	// refuse.
	neutralPhrases = phrases(
		"thank you", "thank you very much", "thank you so much", "thanks a million",
		"would like", "would love", "would appreciate", "right now", "for me", "for us",
		"let us", "you can", "you may", "i would like you to", "i want you to",
		"i said", "i say", "i am saying", "i told you", "like i said",
	)
	// firstPersonSpeech: the caller repeating their own answer ("i said no"). A refusal said this
	// way declines; an approval said this way is still reported speech (it may answer another
	// question).
	firstPersonSpeech = phrases("i said", "i say", "i am saying", "i told you", "like i said")
	// refusalNeutral are harmless inside a refusal only ("don't cancel anything").
	refusalNeutral = wordSet("anything")
	// thirdPersonVerbs after a word of the arguments make it the subject: "dana is fine with it"
	// reports Dana's consent, not the caller's.
	thirdPersonVerbs = wordSet("is are was were has have thinks says agrees wants likes loves")
	// wantVerbs carry a negation over to the action: "i do not want you to do that".
	wantVerbs = wordSet("want need wish like intend plan")
	// neutralWords: function words, polite words and generic verbs and nouns of actions.
	neutralWords = wordSet(`'s uhhuh mhm i me my mine you your we us our it that this these those them the a an
		and then so now just is are be am will can may for to of with on in at from by into onto oh well
		sir maam madam there here really very much please thanks thank cheers kindly want need
		do doing done go going run proceed book send buy order place pay transfer move schedule
		delete remove unlock submit process complete continue
		order booking reservation payment purchase transaction request action thing one`)
)

// Veto tables.
var (
	// instructionPhrases are addressed to the system, not answers of a caller: prompt injection,
	// role play, talk about the assistant, the verifier or the rules.
	instructionPhrases = phrases(
		"ignore", "disregard", "instruction", "instructions", "system", "assistant", "developer",
		"admin", "administrator", "sudo", "root", "prompt", "override", "bypass", "jailbreak",
		"pretend", "roleplay", "role play", "act as", "act like", "verdict", "verifier", "json",
		"print", "respond with", "output", "simulate", "model", "ai", "chatbot", "bot", "gpt",
		"llm", "user", "caller", "consent", "granted", "you must", "you are now", "from now on",
		"play a game", "treat every", "treat this", "always say", "your rules", "the rules",
		"rules", "permission check", "safety check", "confirmation", "mark this", "mark it",
		"mark as", "approve everything", "approve all", "new rule", "mode", "forget your",
		"forget everything", "previous", "above", "execute", "command", "token",
	)
	// reportedPhrases relay someone else's words or wishes, or quote.
	reportedPhrases = phrases(
		"said", "say", "says", "saying", "told", "tell", "tells", "telling", "asked", "asks",
		"wants", "thinks", "according to", "quote", "unquote", "mentioned",
		"claims", "claimed", "he", "she", "they", "his", "her", "hers", "their", "wife",
		"husband", "boss", "manager", "mom", "mum", "mother", "dad", "father", "parents",
		"partner", "friend", "son", "daughter", "brother", "sister", "kids", "children",
		"colleague", "coworker", "someone", "somebody", "everyone", "everybody", "accountant",
		"doctor", "lawyer", "spouse", "girlfriend", "boyfriend", "roommate", "family",
	)
	// whWords open a question.
	whWords = wordSet("what why how where who whom whose which")
	// auxiliaries open a yes/no question when a subject follows ("is it", "can you").
	auxiliaries = wordSet("is are was were do does did can could will would shall should have has may might am")
	// subjects follow an auxiliary in a question.
	subjects = wordSet("i you it that this there we they he she the my your these those anyone someone anybody")
	// whFollowers follow a wh-word in a question anywhere in a clause ("yes what time").
	whFollowers = wordSet("is are was were do does did can could will would should about time much many long kind sort")
	// hypotheticalPhrases talk about a possible world rather than this one. "would" inside an
	// approval phrase ("that would be great", "i would like that") does not count.
	hypotheticalPhrases = phrases(
		"would", "could", "might", "what if", "suppose", "supposing", "supposed", "imagine",
		"hypothetically", "hypothetical", "theoretically", "in theory", "in principle",
		"principle", "let us say", "if i were", "perfect world", "were", "wish",
	)
	// conditionPhrases attach a condition ("yes if", "only if", "unless", "once", "after").
	conditionPhrases = phrases(
		"if", "unless", "provided", "providing", "as long as", "so long as", "assuming",
		"on condition", "condition", "conditions", "only", "when", "whenever", "once",
		"as soon as", "after", "before", "until", "till", "depending", "depends", "in case",
		"otherwise", "subject to", "contingent",
	)
	// qualifierPhrases limit what came before ("yes, but ...").
	qualifierPhrases = phrases("but", "except", "though", "although", "however")
	// sarcasmPhrases mark irony. "yeah right" is handled in the veto (not "yeah right away").
	sarcasmPhrases = phrases(
		"whatever", "oh great", "oh sure", "oh perfect", "oh wonderful", "oh joy",
		"oh brilliant", "oh fantastic", "oh lovely", "oh absolutely", "oh totally",
		"oh yeah totally", "oh yeah sure", "oh yes sure", "oh right", "oh good", "as if",
		"what could go wrong", "wow", "lol", "haha", "hah", "heh", "hehe", "lmao", "rofl",
		"great idea not", "thanks a lot", "big deal", "like i would", "like that is going to",
		"made of money", "because that", "totally not", "yeah yeah whatever", "sure sure whatever",
		"how wonderful", "how lovely", "just what i needed", "just great", "great just great",
	)
	// hedgePhrases weaken a reply into a guess, a delay or a non-answer.
	hedgePhrases = phrases(
		"guess", "maybe", "probably", "perhaps", "possibly", "think", "suppose", "reckon",
		"believe", "kind of", "kinda", "sort of", "sorta", "hmm", "hm", "huh", "eh", "meh",
		"mm", "mmm", "m", "wait", "hang on", "hold on", "moment", "let me think",
		"let me check", "let me see", "seems", "seem", "seemingly", "leaning", "or",
		"not sure", "i mean", "unsure", "uncertain", "either", "whichever", "somewhat", "ish",
		"presumably", "likely", "unlikely", "hopefully", "sometime", "someday", "no idea",
		"do not know", "fair enough", "i hope", "hope so", "up to you", "your call",
		"i will", "i can", "i am going to", "i shall", "myself", "ourselves",
	)
	// changeMarkers ask for something other than the pending action.
	changeMarkers = phrases(
		"instead", "rather", "change", "switch", "swap", "make it", "make that", "make them",
		"actually", "different", "another", "other", "add", "plus", "extra", "more", "less",
		"fewer", "also", "too", "without", "minus", "upgrade", "downgrade", "cc", "bcc",
		"whole", "entire", "everything", "every", "both", "each", "half", "double", "twice",
		"triple", "cheaper", "cheapest", "earlier", "later", "sooner", "next", "last", "new",
		"reschedule", "split", "except", "apart from", "along with", "as well",
	)
	// valueWords name values (days, times, sizes, classes, currencies). One that is not in the
	// action's arguments changes them.
	valueWords = wordSet(`monday tuesday wednesday thursday friday saturday sunday today tomorrow
		tonight yesterday weekend morning afternoon evening noon midnight week weeks month months
		year years day days hour hours minute minutes pm oclock january february april june july
		august september october november december jan feb apr jun jul aug sep sept oct nov dec
		small medium large xl xxl regular personal business economy first premium basic standard
		window aisle middle class dollars dollar bucks buck usd euros euro eur pounds pound quid
		gbp yen cents cent pence percent pesos francs a.m. thousand million`)
	// currencyGroups: the words for one currency; a currency in the arguments allows its group.
	currencyGroups = [][]string{
		{"usd", "dollar", "dollars", "buck", "bucks"},
		{"eur", "euro", "euros"},
		{"gbp", "pound", "pounds", "quid"},
		{"jpy", "yen"},
	}
	// prepositions introduce a value; what follows them must belong to the action.
	prepositions = wordSet("to from for at on in with by via into onto")
	// prepositionSkip may stand between a preposition and its value.
	prepositionSkip = wordSet("the a an my our your it this that these those there here now")
	// personPronouns after "to", "from" or "with" name a party the action does not ("send it
	// to me"); after "for" they are the usual beneficiary ("book it for me").
	personPronouns = wordSet("me us you him her them myself ourselves")
	// partyPrepositions introduce a party of the action ("to", "from", "with").
	partyPrepositions = wordSet("to from with into onto")
	// trailingWords cannot end a complete reply: "yes and", "yes, but", "go ahead with the".
	trailingWords = wordSet("and or but if to for with at on in from of by the a an my your our plus except because unless than into onto")
	// joiners add another action when an unknown word follows ("and attach", "then email").
	joiners = wordSet("and then plus also")
	// joinerSkip may stand between a joiner and its verb.
	joinerSkip = wordSet("please also then just and")
	// verbOpeners may stand before a verb that opens a clause ("never mind, just book it").
	verbOpeners = wordSet("please just then and so now also")
	// restrictors limit the action to part of it when a word of the action follows ("just
	// pepperoni"); "just do it" is an approval.
	restrictors = wordSet("just simply merely")
)
