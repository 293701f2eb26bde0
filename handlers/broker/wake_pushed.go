package broker

import "github.com/google/uuid"

// A push this broker commits knows how many partitions of each queue it
// filled. A parked autoAck pop takes one partition (or a few, with
// maxPartitions) and is done, so waking every autoAck pop of a consumer
// group for a push to one partition sends the whole group to the database
// for what one of them can take: with consumers that keep up, most of
// their looks found nothing. Here the push wakes, of each (queue or
// partition, group) key's autoAck pops, as many as it filled partitions,
// each offered one of them (pushed_hint.go), pops not looking right now
// first; the others stay parked. What that leaves waiting is never left
// to the shared re-poll:
//
//   - a pop that finds more than it takes (a candidate it did not try, a
//     partition with more than its batch) wakes the next pop of its key
//     (claimAutoAck);
//   - a pop woken that ends without looking (timeout, client gone) hands
//     the wake-up to another pop of its key (ParkedPop.finish), and one
//     that passed a partition over because another pop was claiming it is
//     woken again when that claim ends short (autoack_race.go);
//   - pops without autoAck, and pops parked on a namespace or task, are
//     all woken as before.
//
// Announcements from other brokers (the mesh, NOTIFY) carry no partition
// count and wake every pop, as do the other local announcements; the
// transport gets the same announcement as before.

// announcePushed announces the queues of a committed push: here, waking
// as many autoAck pops per key as the push filled partitions, each offered
// one of those partitions (pushed_hint.go); to the other brokers through
// the notifier. out is the push's result, item for item.
func (b *Broker) announcePushed(keys []QueueKey, items []PushItem, out []PushResult) {
	filled := b.filledPartitions(items, out)
	for _, k := range keys {
		b.wakeLimited(queueWait(k), filled[k])
		if q, ok := b.queues.peek(k); ok {
			b.wakeTags(k.Tenant, q)
		}
	}
	if b.cfg.Notifier != nil {
		b.cfg.Notifier.QueuesReady(keys)
	}
}

// filledPartitions is, per queue, the distinct partitions items go to, in
// first-seen order. Each carries, as a hint for the pop it wakes, the last
// message the push stored there; a partition that got only duplicates, or
// one of a queue whose claims a hint cannot make (pushedHintable), carries
// none.
func (b *Broker) filledPartitions(items []PushItem, out []PushResult) map[QueueKey][]pushedPart {
	type qp struct {
		k    QueueKey
		part string
	}
	at := make(map[qp]int, 4)
	n := make(map[QueueKey][]pushedPart, 2)
	hintable := make(map[QueueKey]uuid.UUID, 2)
	for i, it := range items {
		p := qp{key(it.tenant, it.Queue), it.Partition}
		j, seen := at[p]
		if !seen {
			j = len(n[p.k])
			at[p] = j
			n[p.k] = append(n[p.k], pushedPart{})
		}
		if i >= len(out) || out[i].Status != Queued {
			continue
		}
		qid, ok := hintable[p.k]
		if !ok {
			if q, cached := b.queues.peek(p.k); cached && pushedHintable(q) {
				qid = q.ID
			}
			hintable[p.k] = qid
		}
		if qid != uuid.Nil {
			n[p.k][j] = pushedPart{queueID: qid, id: out[i].PartitionID, name: it.Partition, last: out[i].MessageID}
		}
	}
	return n
}

// wakeLimited is wake, giving a new wake-up to len(parts) autoAck pops at
// most of each key parked on wk, the i-th of a key offered parts[i]. A look
// key whose autoAck pops got all of them has the push answered by them:
// its new generation is excused (known_empty.go). The excuse is made under
// the same lock as the generation's move, so a look never starts between
// the two.
func (b *Broker) wakeLimited(wk waitKey, parts []pushedPart) {
	n := max(len(parts), 1)
	hint := func(i int) any {
		if i < len(parts) && parts[i].id != uuid.Nil {
			return &parts[i]
		}
		return nil
	}
	b.emptyMu.Lock()
	defer b.emptyMu.Unlock()
	b.gens[wk]++
	for class, got := range b.wait.NotifyLimit(wk, n, hint) {
		if k, ok := class.(lookKey); ok && got >= n {
			b.excused[k]++
		}
	}
}
