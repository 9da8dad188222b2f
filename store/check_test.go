package store

import (
	"fmt"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCheckWhileWriting: the consistency check of a live store runs while
// writers commit (daemon.check under load). Each writer frees the pages
// the previous version of its keys used; a check that compared its
// snapshot with the live freelist would call those pages "reachable
// freed" on a healthy file.
func TestCheckWhileWriting(t *testing.T) {
	s := openTest(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := s.db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("check-load"))
				if err != nil {
					return err
				}
				for k := 0; k < 64; k++ {
					if err := b.Put(fmt.Appendf(nil, "k%03d", k), fmt.Appendf(nil, "%0512d", i)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 300 {
		if err := s.Check(); err != nil {
			t.Error(err)
			break
		}
	}
	close(stop)
	wg.Wait()
}
