package permissions

import (
	"strconv"
	"strings"
)

// number is a value spoken or written in a reply: words[start:end] express value (canonical
// form, see canonicalNumber).
type number struct {
	start, end int
	value      string
}

var (
	unitWords = map[string]int{
		"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
		"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
		"fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
	}
	tensWords = map[string]int{
		"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
		"eighty": 80, "ninety": 90,
	}
	// ordinalWords are ordinals that name a value; "first" is left out because it is mostly
	// "first class" or "first thing", which the value-word veto handles.
	ordinalWords = map[string]int{
		"second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
		"ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
		"fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19,
		"twentieth": 20, "thirtieth": 30,
	}
	// pronounOne: after these words "one" is a pronoun ("that one", "the large one").
	pronounOne = wordSet("that this the which each any every no another other same right wrong " +
		"first last next big small large medium cheap cheaper better new old only")
)

// findNumbers finds the numbers in words: digit tokens, runs of number words ("twenty five",
// "a hundred", "two thousand"), and ordinals ("second").
func findNumbers(words []string) []number {
	var out []number
	for i := 0; i < len(words); {
		w := words[i]
		if w != "" && w[0] >= '0' && w[0] <= '9' {
			out = append(out, number{i, i + 1, canonicalNumber(w)})
			i++
			continue
		}
		if v, ok := ordinalWords[w]; ok && !(w == "second" && i > 0 && words[i-1] == "a") {
			out = append(out, number{i, i + 1, strconv.Itoa(v)})
			i++
			continue
		}
		if w == "one" && i > 0 && pronounOne[words[i-1]] {
			i++
			continue
		}
		if i > 0 && out != nil && out[len(out)-1].end == i {
			if scale, ok := scales[w]; ok {
				// "25 thousand": the scale multiplies the digits before it.
				last := &out[len(out)-1]
				if f, err := strconv.ParseFloat(last.value, 64); err == nil && f < 1e9 {
					last.value = strconv.FormatFloat(f*float64(scale), 'f', -1, 64)
					last.end = i + 1
					i++
					continue
				}
			}
		}
		if v, end := numberWords(words, i); end > i {
			out = append(out, number{i, end, strconv.FormatInt(v, 10)})
			i = end
			continue
		}
		i++
	}
	return out
}

// numberWords parses a run of number words starting at words[i]; it returns the value and the
// end of the run (end == i: no number there). "two fifty" is read as two numbers, 2 and 50.
func numberWords(words []string, i int) (int64, int) {
	var total, cur int64
	j, seen := i, false
	for j < len(words) {
		w := words[j]
		if v, ok := unitWords[w]; ok {
			if seen && !(cur%100 == 0 || (cur%100 >= 20 && cur%10 == 0 && v < 10)) {
				break
			}
			cur += int64(v)
		} else if v, ok := tensWords[w]; ok {
			if seen && cur%100 != 0 {
				break
			}
			cur += int64(v)
		} else if w == "hundred" {
			if cur == 0 {
				cur = 1
			}
			if cur >= 100 {
				break
			}
			cur *= 100
		} else if scale, ok := scales[w]; ok {
			if cur == 0 {
				cur = 1
			}
			total += cur * scale
			cur = 0
		} else if w == "dozen" {
			if cur == 0 {
				cur = 1
			}
			cur *= 12
		} else if w == "a" && !seen && j+1 < len(words) && scaleWords[words[j+1]] {
			// "a hundred", "a dozen": the scale word sets the value.
		} else if w == "and" && seen && j+1 < len(words) && isNumberWord(words[j+1]) {
			// "a hundred and five"
		} else {
			break
		}
		if w != "a" && w != "and" {
			seen = true
		}
		j++
		if total > 1e12 || cur > 1e12 {
			break
		}
	}
	if !seen {
		return 0, i
	}
	return total + cur, j
}

var (
	scaleWords = wordSet("hundred thousand million billion dozen")
	scales     = map[string]int64{"thousand": 1000, "million": 1000000, "billion": 1000000000}
)

func isNumberWord(w string) bool {
	_, u := unitWords[w]
	_, t := tensWords[w]
	return u || t || scaleWords[w]
}

// canonicalNumber writes a digit token in one form: leading zeros dropped, "82.40" → "82.4",
// "1,000" → "1000", "07:30" → "7:30".
func canonicalNumber(s string) string {
	if strings.Contains(s, ":") {
		h, m, _ := strings.Cut(s, ":")
		return canonicalNumber(h) + ":" + m
	}
	if strings.Contains(s, ",") {
		parts := strings.Split(s, ",")
		thousands := true
		for _, p := range parts[1:] {
			thousands = thousands && len(p) == 3
		}
		if thousands {
			s = strings.Join(parts, "")
		} else {
			s = strings.ReplaceAll(s, ",", ".")
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && strings.Count(s, ".") <= 1 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return s
}
