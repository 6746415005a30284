package table

// staleHeap is a binary min-heap of STALE entries ordered by the time their
// state began. Each entry records its own position (Entry.heapIdx), so it
// can leave the heap in O(log n) when its state changes.
type staleHeap []*Entry

func (h *staleHeap) less(i, j int) bool { return (*h)[i].Since < (*h)[j].Since }

func (h *staleHeap) swap(i, j int) {
	s := *h
	s[i], s[j] = s[j], s[i]
	s[i].heapIdx = int32(i)
	s[j].heapIdx = int32(j)
}

func (h *staleHeap) push(e *Entry) {
	*h = append(*h, e)
	e.heapIdx = int32(len(*h) - 1)
	h.up(len(*h) - 1)
}

func (h *staleHeap) min() *Entry {
	if len(*h) == 0 {
		return nil
	}
	return (*h)[0]
}

func (h *staleHeap) remove(e *Entry) {
	i := int(e.heapIdx)
	n := len(*h) - 1
	if i < 0 || i > n || (*h)[i] != e {
		return
	}
	if i != n {
		h.swap(i, n)
	}
	(*h)[n] = nil
	*h = (*h)[:n]
	e.heapIdx = -1
	if i != n {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h *staleHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *staleHeap) down(i0 int) bool {
	i, n := i0, len(*h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
