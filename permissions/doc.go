// Package permissions judges a caller's spoken reply to a permission ask (SPEC 12).
//
// A tool declared with requires_permission does not run until the caller has clearly and
// unconditionally authorized that exact call. A Verifier reads the pending Action (tool name,
// arguments and the words the agent used to ask) and the caller's final transcript, and returns
// a Judgement: approve, hold (unclear: the agent asks again) or decline (a clear refusal).
//
// Rules is the built-in, deterministic verifier and the default. It works as a small pipeline:
//
//  1. normalize: lowercase, unify apostrophes and quotes, expand contractions, fix common ASR
//     spellings ("o.k.", "go a head", "yess"), drop fillers ("uh", "um") and bracketed noise
//     annotations ("[inaudible]"), and split the reply into words and clauses;
//  2. vetoes: an ordered table of named rules, each of which blocks approval with its own reason
//     (instruction, reported_speech, question, hypothetical, condition, sarcasm, ambiguous,
//     changed_arguments, negation, ...);
//  3. classify: what remains is covered with phrase tables. It is approved only when it contains
//     an approval phrase and every other word is known to be harmless (a filler, a polite word, a
//     function word, or a word or number taken from the action itself); it is declined when it is
//     a clean refusal; anything else is held.
//
// The vetoes are exported on their own as Rules.Veto, so that another verifier (LLMJudge) can
// require its approvals to pass them.
//
// RunVerifyCommand is the engine of `backchannel verify-permission`, which lets operators test
// their phrasing against the default verifier, one JSON line in, one JSON line out.
package permissions
