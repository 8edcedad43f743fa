// Package textagent is the agent-role protocol of SPEC 13: the texts a text agent (frames with
// role "agent", or the MCP facade of SPEC 14) receives from the broker, and the rules of the
// built-in tools `wait`, `cancel` and `status`.
//
// Content renders the result text format of SPEC 13 — `name: value` header lines in a fixed
// order, then an empty line and the body — with every header value escaped, so metadata can never
// add a line. The fixed texts of SPEC 13 (placeholder, prompts, error messages) are defined here
// once; ValidateStatus checks the arguments of a `status` call.
package textagent
