package voice

// recentIDs is a bounded set of the latest ids added to it.
type recentIDs struct {
	order []string
	set   map[string]struct{}
}

// recentIDsKept is how many ended response ids a voice session remembers.
const recentIDsKept = 64

func (r *recentIDs) has(id string) bool { _, ok := r.set[id]; return ok }

func (r *recentIDs) add(id string) {
	if r.set == nil {
		r.set = make(map[string]struct{}, recentIDsKept)
	}
	if r.has(id) {
		return
	}
	if len(r.order) == recentIDsKept {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, id)
	r.set[id] = struct{}{}
}
