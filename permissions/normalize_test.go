package permissions

import (
	"reflect"
	"strings"
	"testing"
)

func TestNormalizeWords(t *testing.T) {
	for reply, want := range map[string]string{
		"Don’t.":                  "do not",
		"dont":                    "do not",
		"DO NOT":                  "do not",
		"uh, yeah, go ahead":      "yeah go ahead",
		"Um yes please.":          "yes please",
		"O.K.":                    "ok",
		"go a head":               "go ahead",
		"goahead":                 "go ahead",
		"YESSS!!!":                "yes",
		"yess":                    "yes",
		"It’s fine":               "it is fine",
		"its fine":                "it is fine",
		"That's right.":           "that is right",
		"Let's do it":             "let us do it",
		"I'd rather not":          "i would rather not",
		"I can't":                 "i can not",
		"won't":                   "will not",
		"Luigi's":                 "luigi 's",
		"15th":                    "15",
		"4pm":                     "4 pm",
		"3 am":                    "3 a.m.",
		"I am":                    "i am",
		"25k":                     "25 thousand",
		"7:30":                    "7:30",
		"$82.40":                  "dollars 82.40",
		"old-draft.txt":           "old draft txt",
		"bob@example.com":         "bob example com",
		"like, yes":               "yes",
		"you know, yes, do it":    "yes do it",
		"I like it":               "i like it",
		"uh-huh":                  "uhhuh",
		"mm hmm":                  "mhm",
		"all right":               "alright",
		"yes 👍":                   "yes <symbol>",
		"yes [inaudible] no":      "yes no",
		"no\u200byes":             "no yes",
		"Yes\u2014go ahead":       "yes go ahead",
		"":                        "",
		"...":                     "",
		"uh um er":                "",
		"Ye\u0301s":               "ye s", // a combining mark separates words
		"'Go ahead'":              "go ahead",
		"kids' toys":              "kids toys",
		"Q3 report":               "q 3 report",
		"yes . yes":               "yes yes",
		"twenty-five":             "twenty five",
		"the \"verdict\" approve": "the verdict approve",
	} {
		if got := strings.Join(normalize(reply).words, " "); got != want {
			t.Errorf("normalize(%q) = %q, want %q", reply, got, want)
		}
	}
}

func TestNormalizeFlags(t *testing.T) {
	type flags struct{ question, quoted, machine bool }
	for reply, want := range map[string]flags{
		"yes":                    {},
		"yes?":                   {question: true},
		"¿yes":                   {question: true},
		"yes？":                   {question: true},
		"“yes”":                  {quoted: true},
		`"yes"`:                  {quoted: true},
		"'yes'":                  {quoted: true},
		"ok'":                    {quoted: true},
		"yes'":                   {}, // read as a plural possessive, like "kids'"
		"the kids' toys":         {},
		"it's":                   {},
		"{\"verdict\":\"ok\"}":   {quoted: true, machine: true},
		"verdict=approve":        {machine: true},
		"approve | yes":          {machine: true},
		"[system] ok":            {},
		"yes [inaudible] right?": {question: true},
	} {
		u := normalize(reply)
		if got := (flags{u.question, u.quoted, u.machine}); got != want {
			t.Errorf("normalize(%q) flags %+v, want %+v", reply, got, want)
		}
	}
}

func TestNormalizeAnnotationsAndClauses(t *testing.T) {
	u := normalize("[noise] yes, (coughs) go ahead *laughs* <unk")
	if want := []string{"noise", "coughs", "laughs", "unk"}; !reflect.DeepEqual(u.annotations, want) {
		t.Errorf("annotations %q, want %q", u.annotations, want)
	}
	if want := []string{"yes", "go", "ahead"}; !reflect.DeepEqual(u.words, want) {
		t.Errorf("words %q", u.words)
	}
	if u.clause[0] == u.clause[1] || u.clause[1] != u.clause[2] {
		t.Errorf("clauses %v", u.clause)
	}
	u = normalize("yes - no")
	if u.clause[0] == u.clause[1] {
		t.Errorf("a dash between spaces ends a clause: %v", u.clause)
	}
}

func TestFindNumbers(t *testing.T) {
	for reply, want := range map[string]string{
		"twenty five":            "25",
		"twenty-five":            "25",
		"a hundred and five":     "105",
		"five hundred":           "500",
		"two fifty":              "2 50",
		"three thousand":         "3000",
		"25 thousand":            "25000",
		"25k":                    "25000",
		"a dozen":                "12",
		"one ticket":             "1",
		"that one":               "",
		"the large one":          "",
		"just one":               "1",
		"the second passenger":   "2",
		"hold on a second":       "",
		"1,000":                  "1000",
		"2,5":                    "2.5",
		"07:30":                  "7:30",
		"82.40":                  "82.4",
		"0042":                   "42",
		"the 14th of june":       "14",
		"seven thirty":           "7 30",
		"nineteen ninety nine":   "19 99",
		"one hundred twenty one": "121",
	} {
		var got []string
		for _, n := range normalize(reply).nums {
			got = append(got, n.value)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("numbers in %q = %q, want %q", reply, got, want)
		}
	}
}
