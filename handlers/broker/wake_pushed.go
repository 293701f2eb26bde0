package broker

// A push this broker commits knows how many partitions of each queue it
// filled. A parked autoAck pop takes one partition (or a few, with
// maxPartitions) and is done, so waking every autoAck pop of a consumer
// group for a push to one partition sends the whole group to the database
// for what one of them can take: with consumers that keep up, most of
// their looks found nothing. Here the push wakes, of each (queue or
// partition, group) key's autoAck pops, as many as it filled partitions;
// the others stay parked. What that leaves waiting is never left to the
// shared re-poll:
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
// as many autoAck pops per key as the push filled partitions; to the other
// brokers through the notifier.
func (b *Broker) announcePushed(keys []QueueKey, items []PushItem) {
	filled := filledPartitions(items)
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

// filledPartitions is the number of distinct partitions items go to, per
// queue.
func filledPartitions(items []PushItem) map[QueueKey]int {
	type qp struct {
		k    QueueKey
		part string
	}
	seen := make(map[qp]bool, 4)
	n := make(map[QueueKey]int, 2)
	for _, it := range items {
		p := qp{key(it.tenant, it.Queue), it.Partition}
		if !seen[p] {
			seen[p] = true
			n[p.k]++
		}
	}
	return n
}

// wakeLimited is wake, giving a new wake-up to n autoAck pops at most of
// each key parked on wk. A look key whose autoAck pops got all n has the
// push answered by them: its new generation is excused (known_empty.go).
// The excuse is made under the same lock as the generation's move, so a
// look never starts between the two.
func (b *Broker) wakeLimited(wk waitKey, n int) {
	n = max(n, 1)
	b.emptyMu.Lock()
	defer b.emptyMu.Unlock()
	b.gens[wk]++
	for class, got := range b.wait.NotifyLimit(wk, n) {
		if k, ok := class.(lookKey); ok && got >= n {
			b.excused[k]++
		}
	}
}
