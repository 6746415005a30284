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
	if cap(*h) > 1024 && len(*h) < cap(*h)/4 {
		*h = append(staleHeap(nil), *h...) // give back what a storm grew
	}
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
