package frames

import "encoding/json"

// ToolDecl declares one tool a host serves (SPEC 4). The broker checks the name pattern, the
// uniqueness of names, the JSON Schema in parameters and the duration limits; this package
// checks field types, required fields and expected_duration.
type ToolDecl struct {
	// Name is the tool's name, ^[a-zA-Z0-9_-]{1,64}$, unique within one declaration.
	Name string `json:"name" required:"true"`
	// Description tells the agent what the tool does.
	Description string `json:"description" required:"true"`
	// Parameters is the JSON Schema (an object) that the call arguments must satisfy.
	Parameters json.RawMessage `json:"parameters" required:"true" kind:"object"`
	// Timeout is the ordinary tool timeout; default 10s, at most 120s.
	Timeout Duration `json:"timeout,omitempty"`
	// Deferred lets the host acknowledge a call with tool_deferred (SPEC 6).
	Deferred bool `json:"deferred,omitempty"`
	// DeferredTimeout is the job clock after a defer is accepted; default 2h, at most 24h; only
	// with deferred.
	DeferredTimeout Duration `json:"deferred_timeout,omitempty"`
	// RequiresPermission makes every call wait for the caller's spoken approval (SPEC 12).
	RequiresPermission bool `json:"requires_permission,omitempty"`
	// ExpectedDuration tells the agent how to phrase hand-offs: instant, seconds, minutes or hours.
	ExpectedDuration ExpectedDuration `json:"expected_duration,omitempty"`
	// NotifyOnComplete voices the completion of a deferred job; nil means the default, which is
	// true for deferred tools.
	NotifyOnComplete *bool `json:"notify_on_complete,omitempty"`
}

// Validate checks expected_duration.
func (d ToolDecl) Validate() error { return d.validate("") }

// validate checks d as the element at path (for example "tools[2]") of a frame.
func (d ToolDecl) validate(path string) error {
	if d.ExpectedDuration != "" && !d.ExpectedDuration.Valid() {
		e := badEnum(join(path, "expected_duration"), expectedDurations)
		if path != "" && d.Name != "" {
			e.Message += toolLabel(d.Name)
		}
		return e
	}
	return nil
}

// wireLabel names a declaration in error messages by its name field: (tool "NAME").
func (ToolDecl) wireLabel() (field, noun string) { return "name", "tool" }

// NotifiesOnComplete reports whether the completion of a deferred call is voiced: the
// notify_on_complete flag, or deferred when it is absent (SPEC 4).
func (d ToolDecl) NotifiesOnComplete() bool {
	if d.NotifyOnComplete != nil {
		return *d.NotifyOnComplete
	}
	return d.Deferred
}

// ToolsDeclare replaces the sender's tool set (SPEC 4). The broker answers tools.declared, or a
// bad_frame error naming the invalid tool and field; nothing of a rejected declaration applies.
type ToolsDeclare struct {
	Request
	// Tools is the complete new tool set of the sending connection.
	Tools []ToolDecl `json:"tools" required:"true"`
}

// FrameType returns "tools.declare".
func (ToolsDeclare) FrameType() string { return "tools.declare" }

// Validate checks each tool declaration.
func (f ToolsDeclare) Validate() error { return validateTools(f.Tools) }

// ToolsDeclared confirms a tool declaration, from tools.declare or hello (SPEC 4).
type ToolsDeclared struct {
	Reply
	// Names lists the declared tool names, in declaration order.
	Names []string `json:"names" required:"true"`
}

// FrameType returns "tools.declared".
func (ToolsDeclared) FrameType() string { return "tools.declared" }

// validateTools validates each declaration as tools[i].
func validateTools(tools []ToolDecl) error {
	for i := range tools {
		if err := tools[i].validate(index("tools", i)); err != nil {
			return err
		}
	}
	return nil
}
