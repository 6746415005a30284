package table

// staleHeap is a binary min-heap of the slots of STALE entries, ordered
// by the time their state began. Each record keeps its own position
// (rec.heapIdx), so it can leave the heap in O(log n) when its state
// changes. Slots are 4 bytes: a million STALE entries cost 4 MB here.
type staleHeap []uint32

func (h staleHeap) less(st *store, i, j int) bool { return st.at(h[i]).since < st.at(h[j]).since }

func (h staleHeap) swap(st *store, i, j int) {
	h[i], h[j] = h[j], h[i]
	st.at(h[i]).heapIdx = int32(i)
	st.at(h[j]).heapIdx = int32(j)
}

func (h *staleHeap) push(st *store, slot uint32) {
	*h = append(*h, slot)
	st.at(slot).heapIdx = int32(len(*h) - 1)
	h.up(st, len(*h)-1)
}

func (h staleHeap) min() (uint32, bool) {
	if len(h) == 0 {
		return 0, false
	}
	return h[0], true
}

func (h *staleHeap) remove(st *store, slot uint32) {
	r := st.at(slot)
	i := int(r.heapIdx)
	n := len(*h) - 1
	if i < 0 || i > n || (*h)[i] != slot {
		return
	}
	if i != n {
		h.swap(st, i, n)
	}
	*h = (*h)[:n]
	r.heapIdx = -1
	if i != n {
		if !h.down(st, i) {
			h.up(st, i)
		}
	}
	h.shrink()
}

// shrink gives back what a storm grew, once the heap is down to a
// quarter of it.
func (h *staleHeap) shrink() {
	if cap(*h) > 1024 && len(*h) < cap(*h)/4 {
		*h = append(staleHeap(nil), *h...)
	}
}

// split takes every slot for which out reports true out of the heap at
// once, and returns them in no order. They stay in the heap's backing
// array past its new length, so the result is good until the heap next
// grows; the caller shrinks it after. For a storm (a table filled at
// once crossing the threshold together) this is one pass and one
// heapify, where taking each from the top costs a sift through log n
// records in no order in memory (BENCHMARKS.md).
func (h *staleHeap) split(st *store, out func(r *rec) bool) []uint32 {
	a := *h
	k := 0
	for i, slot := range a {
		if !out(st.at(slot)) {
			a[k], a[i] = slot, a[k]
			k++
		}
	}
	for _, slot := range a[k:] {
		st.at(slot).heapIdx = -1
	}
	*h = a[:k]
	for i, slot := range *h {
		st.at(slot).heapIdx = int32(i)
	}
	for i := k/2 - 1; i >= 0; i-- {
		h.down(st, i)
	}
	return a[k:]
}

func (h staleHeap) up(st *store, j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(st, j, i) {
			break
		}
		h.swap(st, i, j)
		j = i
	}
}

func (h staleHeap) down(st *store, i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(st, r, l) {
			j = r
		}
		if !h.less(st, j, i) {
			break
		}
		h.swap(st, i, j)
		i = j
	}
	return i > i0
}
