package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/backchannel-io/backchannel/jobs"
)

// runStore checks the store-level contract of jobs.Store directly, without an engine.
func runStore(t *testing.T, newStore Factory) {
	t.Run("CreateAndLoad", func(t *testing.T) { testCreateAndLoad(t, newStore) })
	t.Run("VersionConflict", func(t *testing.T) { testVersionConflict(t, newStore) })
	t.Run("RetriedTransitionAppliesOnce", func(t *testing.T) { testRetry(t, newStore) })
	t.Run("HandleClaimAndBurn", func(t *testing.T) { testHandles(t, newStore) })
	t.Run("FailedClaimAppliesNothing", func(t *testing.T) { testFailedClaimAtomic(t, newStore) })
	t.Run("ClaimDueLeases", func(t *testing.T) { testClaimDue(t, newStore) })
	t.Run("CascadeMarker", func(t *testing.T) { testCascadeMarker(t, newStore) })
	t.Run("Indexes", func(t *testing.T) { testIndexes(t, newStore) })
	t.Run("Retention", func(t *testing.T) { testRetention(t, newStore) })
	t.Run("TenantsAreSeparate", func(t *testing.T) { testTenantSeparation(t, newStore) })
	t.Run("TimelineFrom", func(t *testing.T) { testTimelineFrom(t, newStore) })
}

// rawJob is a job record for store-level tests.
func rawJob(sess, callID string, v int64, state jobs.State, deadline int64) *jobs.Job {
	return &jobs.Job{Tenant: tenantA, SessionID: sess, CallID: callID, State: state, Version: v,
		DeadlineMS: deadline, Tool: jobs.Tool{Name: "t"}, Arguments: json.RawMessage(`{"a":[1,2]}`)}
}

func create(t testing.TB, s jobs.Store, j *jobs.Job, entries ...jobs.Entry) {
	t.Helper()
	tr := &jobs.Transition{ID: jobs.NewCallID(), Tenant: j.Tenant, SessionID: j.SessionID, CallID: j.CallID,
		Check: true, Job: j, Entries: entries, Retention: time.Hour, NowMS: j.CreatedMS}
	if err := s.Apply(context.Background(), tr); err != nil {
		t.Fatalf("create %s: %v", j.CallID, err)
	}
}

func move(s jobs.Store, from *jobs.Job, to jobs.State, deadline int64) (*jobs.Job, *jobs.Transition, error) {
	next := from.Clone()
	next.State, next.Version, next.DeadlineMS = to, from.Version+1, deadline
	tr := &jobs.Transition{ID: jobs.NewCallID(), Tenant: from.Tenant, SessionID: from.SessionID, CallID: from.CallID,
		Check: true, Expect: from.Version, Job: next, From: from.State, Retention: time.Hour}
	return next, tr, s.Apply(context.Background(), tr)
}

func testCreateAndLoad(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	j := rawJob(sess, "call_create", 1, jobs.Pending, 0)
	j.Interaction = &jobs.Interaction{ID: "ia_1", Prompt: "Which?", Options: []string{"A", "B"}}
	create(t, s, j, jobs.Entry{AtMS: 5, Kind: jobs.KindCall, CallID: j.CallID, Detail: map[string]any{"name": "t", "n": 1.5}})
	got, err := s.Job(ctx, tenantA, j.CallID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.State != jobs.Pending || got.Interaction == nil || got.Interaction.Options[1] != "B" {
		t.Fatalf("loaded %+v", got)
	}
	if string(got.Arguments) != `{"a":[1,2]}` {
		t.Fatalf("arguments %s", got.Arguments)
	}
	if _, err := s.Job(ctx, tenantA, "call_missing"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("missing job: %v, want ErrNotFound", err)
	}
	tl, err := s.Timeline(ctx, tenantA, sess, 0)
	if err != nil || len(tl) != 1 || tl[0].Kind != jobs.KindCall || tl[0].AtMS != 5 || tl[0].Detail["n"] != 1.5 {
		t.Fatalf("timeline %+v %v", tl, err)
	}
	if tl, _ := s.Timeline(ctx, tenantA, "no-such-session", 0); len(tl) != 0 {
		t.Fatalf("timeline of an unknown session: %v", tl)
	}
}

func testVersionConflict(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	sess := session()
	j := rawJob(sess, "call_conflict", 1, jobs.Pending, 0)
	create(t, s, j)
	// Creating it again conflicts: it exists at version 1.
	tr := &jobs.Transition{ID: "again", Tenant: tenantA, SessionID: sess, CallID: j.CallID, Check: true, Job: rawJob(sess, j.CallID, 1, jobs.Pending, 0)}
	var ce *jobs.ConflictError
	if err := s.Apply(context.Background(), tr); !errors.As(err, &ce) || ce.Version != 1 {
		t.Fatalf("second create: %v, want conflict at version 1", err)
	}
	// Two writers from version 1: the first wins, the second conflicts and applies nothing.
	_, _, err := move(s, j, jobs.Completed, 0)
	if err != nil {
		t.Fatal(err)
	}
	stale := j.Clone()
	stale.Version = 1
	_, _, err = move(s, stale, jobs.TimedOut, 0)
	if !errors.As(err, &ce) || ce.Version != 2 {
		t.Fatalf("stale write: %v, want conflict at version 2", err)
	}
	if got, _ := s.Job(context.Background(), tenantA, j.CallID); got.State != jobs.Completed {
		t.Fatalf("state %s after a lost race, want completed", got.State)
	}
	// A check-only transition conflicts the same way and appends nothing.
	chk := &jobs.Transition{ID: "chk", Tenant: tenantA, SessionID: sess, CallID: j.CallID, Check: true, Expect: 1,
		Entries: []jobs.Entry{{Kind: jobs.KindProgress, CallID: j.CallID}}}
	if err := s.Apply(context.Background(), chk); !errors.As(err, &ce) {
		t.Fatalf("stale check: %v, want conflict", err)
	}
	if tl, _ := s.Timeline(context.Background(), tenantA, sess, 0); len(tl) != 0 {
		t.Fatalf("a conflicting transition appended %v", tl)
	}
}

func testRetry(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	sess := session()
	j := rawJob(sess, "call_retry", 1, jobs.Pending, 0)
	create(t, s, j)
	next := j.Clone()
	next.State, next.Version = jobs.Completed, 2
	tr := &jobs.Transition{ID: "txn-retry-1", Tenant: tenantA, SessionID: sess, CallID: j.CallID, Check: true, Expect: 1,
		Job: next, From: jobs.Pending, Retention: time.Hour,
		Entries: []jobs.Entry{{Kind: jobs.KindResult, CallID: j.CallID, Detail: map[string]any{}}}}
	for i := range 3 {
		if err := s.Apply(context.Background(), tr); err != nil {
			t.Fatalf("apply #%d of the same transition: %v", i+1, err)
		}
	}
	tl, _ := s.Timeline(context.Background(), tenantA, sess, 0)
	if len(tl) != 1 {
		t.Fatalf("a retried transition was applied %d times", len(tl))
	}
	if got, _ := s.Job(context.Background(), tenantA, j.CallID); got.Version != 2 {
		t.Fatalf("version %d, want 2", got.Version)
	}
}

func testHandles(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	a := rawJob(sess, "call_ha", 1, jobs.Pending, 0)
	b := rawJob(sess, "call_hb", 1, jobs.Pending, 0)
	create(t, s, a)
	create(t, s, b)
	claim := func(j *jobs.Job, h string) error {
		next := j.Clone()
		next.State, next.Version, next.Handle = jobs.Deferred, j.Version+1, h
		return s.Apply(ctx, &jobs.Transition{ID: jobs.NewCallID(), Tenant: tenantA, SessionID: sess, CallID: j.CallID,
			Check: true, Expect: j.Version, Job: next, From: j.State, Retention: time.Hour,
			Handle: &jobs.HandleOp{Handle: h, CallID: j.CallID, Claim: true, TTL: time.Hour}})
	}
	if err := claim(a, "report-1"); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Handle(ctx, tenantA, "report-1"); err != nil || rec.CallID != a.CallID || rec.Burned {
		t.Fatalf("handle after claim: %+v %v", rec, err)
	}
	var he *jobs.HandleTakenError
	if err := claim(b, "report-1"); !errors.As(err, &he) || he.Record.Burned || he.Record.CallID != a.CallID {
		t.Fatalf("claim of a live handle: %v, want taken (live, by %s)", err, a.CallID)
	}
	// a ends: its handle is burned in the same transition.
	da, _ := s.Job(ctx, tenantA, a.CallID)
	done := da.Clone()
	done.State, done.Version = jobs.Completed, da.Version+1
	if err := s.Apply(ctx, &jobs.Transition{ID: "end-a", Tenant: tenantA, SessionID: sess, CallID: a.CallID, Check: true,
		Expect: da.Version, Job: done, From: da.State, Retention: time.Hour,
		Handle: &jobs.HandleOp{Handle: "report-1", CallID: a.CallID, TTL: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := s.Handle(ctx, tenantA, "report-1"); !rec.Burned || rec.CallID != a.CallID {
		t.Fatalf("handle after its job ended: %+v, want burned", rec)
	}
	if err := claim(b, "report-1"); !errors.As(err, &he) || !he.Record.Burned {
		t.Fatalf("claim of a burned handle: %v, want taken (burned)", err)
	}
	if _, err := s.Handle(ctx, tenantA, "never"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("unknown handle: %v", err)
	}
}

func testFailedClaimAtomic(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	a := rawJob(sess, "call_fa", 1, jobs.Pending, 0)
	b := rawJob(sess, "call_fb", 1, jobs.Pending, 1000)
	create(t, s, a)
	create(t, s, b)
	if err := s.Apply(ctx, &jobs.Transition{ID: "x", Tenant: tenantA, SessionID: sess, CallID: a.CallID,
		Handle: &jobs.HandleOp{Handle: "shared", CallID: a.CallID, Claim: true, TTL: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	next := b.Clone()
	next.State, next.Version, next.Handle, next.DeadlineMS = jobs.Deferred, 2, "shared", 99999
	err := s.Apply(ctx, &jobs.Transition{ID: "y", Tenant: tenantA, SessionID: sess, CallID: b.CallID, Check: true,
		Expect: 1, Job: next, From: jobs.Pending, Retention: time.Hour,
		Handle:  &jobs.HandleOp{Handle: "shared", CallID: b.CallID, Claim: true, TTL: time.Hour},
		Entries: []jobs.Entry{{Kind: jobs.KindDeferred, CallID: b.CallID}}})
	var he *jobs.HandleTakenError
	if !errors.As(err, &he) {
		t.Fatalf("claim: %v, want HandleTakenError", err)
	}
	got, _ := s.Job(ctx, tenantA, b.CallID)
	if got.Version != 1 || got.State != jobs.Pending {
		t.Fatalf("a failed claim wrote the job: %+v", got)
	}
	if tl, _ := s.Timeline(ctx, tenantA, sess, 0); len(tl) != 0 {
		t.Fatalf("a failed claim appended %v", tl)
	}
	// Its deadline is still the old one.
	due, err := s.ClaimDue(ctx, tenantA, time.UnixMilli(1000), time.Second, 10)
	if err != nil || len(due) != 1 || due[0].Job.CallID != b.CallID {
		t.Fatalf("deadline after a failed claim: %+v %v", due, err)
	}
}

func testClaimDue(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	for i, dl := range []int64{1000, 2000, 3000} {
		create(t, s, rawJob(sess, "call_due"+string(rune('a'+i)), 1, jobs.Pending, dl))
	}
	ids := func(due []jobs.Due) []string {
		var out []string
		for _, d := range due {
			out = append(out, d.Job.CallID)
		}
		slices.Sort(out)
		return out
	}
	due, err := s.ClaimDue(ctx, tenantA, time.UnixMilli(999), time.Second, 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("at 999: %v %v, want nothing due", ids(due), err)
	}
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(2000), 5*time.Second, 10)
	if got := ids(due); !slices.Equal(got, []string{"call_duea", "call_dueb"}) {
		t.Fatalf("at 2000: %v, want a and b (a deadline is due at its millisecond)", got)
	}
	if due[0].Job.Arguments == nil {
		t.Fatalf("claimed job without arguments")
	}
	// Claimed entries are leased: not due again until 2000+5000.
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(3000), 5*time.Second, 10)
	if got := ids(due); !slices.Equal(got, []string{"call_duec"}) {
		t.Fatalf("at 3000: %v, want only c", got)
	}
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(6999), 5*time.Second, 10)
	if len(due) != 0 {
		t.Fatalf("at 6999 the leases still hold, got %v", ids(due))
	}
	// A lease that ran out hands the job to the next claimer (its first claimer died).
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(7000), 5*time.Second, 1)
	if len(due) != 1 {
		t.Fatalf("at 7000 with limit 1: %v", ids(due))
	}
	// A transition moves b's deadline: the lease is replaced by the new deadline.
	b, _ := s.Job(ctx, tenantA, "call_dueb")
	if _, _, err := move(s, b, jobs.Pending, 50000); err != nil {
		t.Fatal(err)
	}
	// A terminal transition removes a's entry.
	a, _ := s.Job(ctx, tenantA, "call_duea")
	if _, _, err := move(s, a, jobs.Completed, 0); err != nil {
		t.Fatal(err)
	}
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(49999), time.Second, 10)
	if got := ids(due); !slices.Equal(got, []string{"call_duec"}) {
		t.Fatalf("at 49999: %v, want only c (lease ended; a finished; b moved)", got)
	}
	due, _ = s.ClaimDue(ctx, tenantA, time.UnixMilli(50000), time.Second, 10)
	if got := ids(due); !slices.Equal(got, []string{"call_dueb"}) {
		t.Fatalf("at 50000: %v, want b", got)
	}
	if due, _ := s.ClaimDue(ctx, tenantB, time.UnixMilli(1e12), time.Second, 10); len(due) != 0 {
		t.Fatalf("another tenant's deadlines were claimed: %v", ids(due))
	}
}

func testCascadeMarker(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	parent := rawJob(sess, "call_parent", 1, jobs.Pending, 0)
	lonely := rawJob(sess, "call_lonely", 1, jobs.Pending, 0)
	create(t, s, parent)
	create(t, s, lonely)
	// A job created with a parent learns the parent's state in the same step.
	newChild := func(id, parentID string) *jobs.Transition {
		child := rawJob(sess, id, 1, jobs.Pending, 0)
		child.ParentCallID = parentID
		tr := &jobs.Transition{ID: jobs.NewCallID(), Tenant: tenantA, SessionID: sess, CallID: id, Check: true,
			Job: child, Retention: time.Hour}
		if err := s.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	if tr := newChild("call_child", parent.CallID); tr.ParentState != jobs.Pending {
		t.Fatalf("child created under an open parent: parent state %q, want pending", tr.ParentState)
	}
	if tr := newChild("call_orphan", "call_never"); tr.ParentState != "" {
		t.Fatalf("child of a parent the store does not hold: parent state %q, want none", tr.ParentState)
	}
	end := func(j *jobs.Job, id string) *jobs.Transition {
		next := j.Clone()
		next.State, next.Version = jobs.Cancelled, j.Version+1
		tr := &jobs.Transition{ID: id, Tenant: tenantA, SessionID: sess, CallID: j.CallID,
			Check: true, Expect: j.Version, Job: next, From: j.State, Retention: time.Hour,
			Cascade: true, NowMS: 1000, LeaseMS: 500}
		if err := s.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// The ending job's children come back with its transition, and again with a retry of it.
	if tr := end(parent, "end-parent"); !slices.Equal(tr.Children, []string{"call_child"}) {
		t.Fatalf("children reported by the parent's end: %v, want [call_child]", tr.Children)
	}
	if tr := end(parent, "end-parent"); !slices.Equal(tr.Children, []string{"call_child"}) {
		t.Fatalf("children reported by a retry of the parent's end: %v, want [call_child]", tr.Children)
	}
	if tr := end(lonely, "end-lonely"); len(tr.Children) != 0 {
		t.Fatalf("children reported for a job without any: %v", tr.Children)
	}
	if tr := newChild("call_late", parent.CallID); tr.ParentState != jobs.Cancelled {
		t.Fatalf("child created under a cancelled parent: parent state %q, want cancelled", tr.ParentState)
	}
	if due, _ := s.ClaimDue(ctx, tenantA, time.UnixMilli(1499), time.Second, 10); len(due) != 0 {
		t.Fatalf("cascade marker due before its lease: %+v", due)
	}
	due, err := s.ClaimDue(ctx, tenantA, time.UnixMilli(1500), time.Second, 10)
	if err != nil || len(due) != 1 || due[0].Cascade != parent.CallID {
		t.Fatalf("due at 1500: %+v %v, want only the parent's cascade marker (the lonely job has no children)", due, err)
	}
	if err := s.DoneCascade(ctx, tenantA, parent.CallID); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.ClaimDue(ctx, tenantA, time.UnixMilli(1e12), time.Second, 10); len(due) != 0 {
		t.Fatalf("marker still due after DoneCascade: %+v", due)
	}
	// A transition may clear a marker as it applies (the cascade's last child does), and only
	// then.
	other := rawJob(sess, "call_other", 1, jobs.Pending, 0)
	create(t, s, other)
	newChild("call_other_child", other.CallID)
	end(other, "end-other")
	kid, _ := s.Job(ctx, tenantA, "call_other_child")
	stale := &jobs.Transition{ID: "stale", Tenant: tenantA, SessionID: sess, CallID: kid.CallID, Check: true,
		Expect: kid.Version + 1, ClearCascade: other.CallID}
	var ce *jobs.ConflictError
	if err := s.Apply(ctx, stale); !errors.As(err, &ce) {
		t.Fatalf("stale transition: %v, want a conflict", err)
	}
	if due, _ := s.ClaimDue(ctx, tenantA, time.UnixMilli(1500), time.Second, 10); len(due) != 1 || due[0].Cascade != other.CallID {
		t.Fatalf("a transition that did not apply cleared the marker: due %+v", due)
	}
	if _, _, err := move(s, kid, jobs.Cancelled, 0); err != nil {
		t.Fatal(err)
	}
	kid, _ = s.Job(ctx, tenantA, kid.CallID)
	if err := s.Apply(ctx, &jobs.Transition{ID: "clear", Tenant: tenantA, SessionID: sess, CallID: kid.CallID, Check: true,
		Expect: kid.Version, ClearCascade: other.CallID}); err != nil {
		t.Fatal(err)
	}
	if due, _ := s.ClaimDue(ctx, tenantA, time.UnixMilli(1e12), time.Second, 10); len(due) != 0 {
		t.Fatalf("marker still due after a transition cleared it: %+v", due)
	}
}

func testIndexes(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	s1, s2 := session(), session()
	p := rawJob(s1, "call_p", 1, jobs.Pending, 0)
	c1 := rawJob(s1, "call_c1", 1, jobs.Deferred, 0)
	c1.ParentCallID = p.CallID
	c2 := rawJob(s1, "call_c2", 1, jobs.Pending, 0)
	c2.ParentCallID = p.CallID
	o := rawJob(s2, "call_o", 1, jobs.Pending, 0)
	for _, j := range []*jobs.Job{p, c1, c2, o} {
		create(t, s, j)
	}
	open, _ := s.OpenJobs(ctx, tenantA, s1)
	if !slices.Equal(open, []string{"call_c1", "call_c2", "call_p"}) {
		t.Fatalf("open jobs of s1: %v", open)
	}
	kids, _ := s.Children(ctx, tenantA, p.CallID)
	if !slices.Equal(kids, []string{"call_c1", "call_c2"}) {
		t.Fatalf("children of p: %v", kids)
	}
	if _, _, err := move(s, c1, jobs.Completed, 0); err != nil {
		t.Fatal(err)
	}
	open, _ = s.OpenJobs(ctx, tenantA, s1)
	kids, _ = s.Children(ctx, tenantA, p.CallID)
	if !slices.Equal(open, []string{"call_c2", "call_p"}) || !slices.Equal(kids, []string{"call_c1", "call_c2"}) {
		t.Fatalf("after c1 ended: open %v, children %v (an ended child stays a child)", open, kids)
	}
	if open, _ := s.OpenJobs(ctx, tenantB, s1); len(open) != 0 {
		t.Fatalf("another tenant sees %v", open)
	}
}

func testRetention(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	j := rawJob(sess, "call_ret", 1, jobs.Deferred, 0)
	create(t, s, j)
	next := j.Clone()
	next.State, next.Version = jobs.Completed, 2
	if err := s.Apply(ctx, &jobs.Transition{ID: "end", Tenant: tenantA, SessionID: sess, CallID: j.CallID, Check: true,
		Expect: 1, Job: next, From: jobs.Deferred, Retention: 300 * time.Millisecond,
		Handle:  &jobs.HandleOp{Handle: "ret-h", CallID: j.CallID, TTL: 300 * time.Millisecond},
		Entries: []jobs.Entry{{Kind: jobs.KindResult, CallID: j.CallID}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Job(ctx, tenantA, j.CallID); err != nil {
		t.Fatalf("terminal job gone at once: %v", err)
	}
	time.Sleep(700 * time.Millisecond)
	if _, err := s.Job(ctx, tenantA, j.CallID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("terminal job after its retention: %v, want ErrNotFound", err)
	}
	if _, err := s.Handle(ctx, tenantA, "ret-h"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("burned handle after its retention: %v, want ErrNotFound", err)
	}
	if tl, _ := s.Timeline(ctx, tenantA, sess, 0); len(tl) != 0 {
		t.Fatalf("timeline after its retention: %v", tl)
	}
}

func testTenantSeparation(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	j := rawJob(sess, "call_tenant", 1, jobs.Pending, 0)
	create(t, s, j)
	if _, err := s.Job(ctx, tenantB, j.CallID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("tenant B loads tenant A's job: %v", err)
	}
	// The same call id and handle in tenant B are independent.
	jb := rawJob(sess, j.CallID, 1, jobs.Pending, 0)
	jb.Tenant = tenantB
	create(t, s, jb)
	for _, tenant := range []string{tenantA, tenantB} {
		if err := s.Apply(ctx, &jobs.Transition{ID: jobs.NewCallID(), Tenant: tenant, SessionID: sess, CallID: j.CallID,
			Handle: &jobs.HandleOp{Handle: "same-handle", CallID: j.CallID, Claim: true, TTL: time.Hour}}); err != nil {
			t.Fatalf("tenant %s claims same-handle: %v", tenant, err)
		}
	}
	if tl, _ := s.Timeline(ctx, tenantB, sess, 0); len(tl) != 0 {
		t.Fatalf("tenant B sees tenant A's timeline: %v", tl)
	}
}

func testTimelineFrom(t *testing.T, newStore Factory) {
	s := newStore(t, jobs.SystemClock{})
	ctx := context.Background()
	sess := session()
	for i := range 5 {
		if err := s.Apply(ctx, &jobs.Transition{ID: jobs.NewCallID(), Tenant: tenantA, SessionID: sess, CallID: "c",
			Retention: time.Hour, Entries: []jobs.Entry{{AtMS: int64(i), Kind: jobs.KindNotice, Detail: map[string]any{}}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ from, n int }{{0, 5}, {3, 2}, {5, 0}, {9, 0}} {
		es, err := s.Timeline(ctx, tenantA, sess, c.from)
		if err != nil || len(es) != c.n || (c.n > 0 && es[0].AtMS != int64(c.from)) {
			t.Fatalf("Timeline from %d: %d entries %v, want %d starting at %d", c.from, len(es), err, c.n, c.from)
		}
	}
}
