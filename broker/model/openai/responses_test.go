package openai

import "testing"

func TestMetadataAndClip(t *testing.T) {
	md := metadata("req_1", "hand_off", map[string]string{MetaKind: "spoofed", MetaLabel: "trip", "empty": ""},
		map[string]string{"z": "1", "y": "2"})
	if md[MetaKind] != "hand_off" || md[MetaRequest] != "req_1" || md[MetaLabel] != "trip" || md["y"] != "2" {
		t.Errorf("metadata %v", md)
	}
	if _, ok := md["empty"]; ok {
		t.Error("an empty value was kept")
	}
	if got := clip("ééé", 3); got != "é" {
		t.Errorf("clip split a rune: %q", got)
	}
	if got := clip("abc", 5); got != "abc" {
		t.Errorf("clip %q", got)
	}
}
