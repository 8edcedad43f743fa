package permissions

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestZZProbe(t *testing.T) {
	acts := map[string]Action{
		"tickets":  {Tool: "buy_tickets", Arguments: json.RawMessage(`{"event":"Coldplay at Wembley","count":2,"section":"floor"}`)},
		"money":    {Tool: "send_money", Arguments: json.RawMessage(`{"to":"Alice","amount":25,"currency":"USD"}`)},
		"transfer": {Tool: "transfer_funds", Arguments: json.RawMessage(`{"from_account":"checking","to_account":"savings","amount":500}`)},
		"meeting":  {Tool: "schedule_meeting", Arguments: json.RawMessage(`{"with":"Dana","date":"2025-06-03","time":"15:00","duration_minutes":30}`)},
		"pizza":    {Tool: "order_pizza", Arguments: json.RawMessage(`{"size":"large","toppings":["pepperoni","mushrooms"],"quantity":1}`)},
		"delete":   {Tool: "delete_file", Arguments: json.RawMessage(`{"path":"/home/sam/notes/old-draft.txt"}`)},
		"flight":   {Tool: "book_flight", Arguments: json.RawMessage(`{"from":"SFO","to":"Paris","date":"2025-06-14","passengers":1}`)},
		"door":     {Tool: "unlock_door", Arguments: json.RawMessage(`{"door":"front"}`)},
		"sub":      {Tool: "cancel_subscription", Arguments: json.RawMessage(`{"service":"Netflix","plan":"premium"}`)},
		"table":    {Tool: "book_table", Arguments: json.RawMessage(`{"restaurant":"Luigi's","party_size":4,"time":"19:30"}`)},
		"bill":     {Tool: "pay_bill", Arguments: json.RawMessage(`{"payee":"City Power","amount":82.40}`)},
		"email":    {Tool: "send_email", Arguments: json.RawMessage(`{"to":"bob@example.com","subject":"Q3 report","body":"Hi Bob, the Q3 report is attached."}`)},
	}
	f, _ := os.Open("/tmp/probe.txt")
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, reply, _ := strings.Cut(sc.Text(), "|")
		j, _ := NewRules().Verify(context.Background(), acts[k], reply)
		fmt.Printf("%-8s %-8s %-18s %q\n", k, j.Verdict, j.Reason, reply)
		if os.Getenv("PROBE_DEBUG") != "" {
			an := analyze(acts[k], reply)
			fmt.Printf("   words=%q kinds=%v nums=%v\n   vocab=%v numbers=%v\n", an.u.words, an.kind, an.u.nums, an.v.words, an.v.numbers)
		}
	}
}
