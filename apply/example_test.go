package apply_test

import (
	"context"
	"fmt"
	"time"

	"github.com/walapply/walapply/apply"
)

// Replicate in a test: start the applier, write on the source, wait until
// the target has it all. (Source and target URLs would come from
// testenv.NewPair or the testcontainers adapter.)
func ExampleStart() {
	ctx := context.Background()
	source := "postgres://postgres@127.0.0.1:5432/app?sslmode=disable"
	target := "postgres://postgres@127.0.0.1:5433/app?sslmode=disable"

	r, err := apply.Start(ctx, apply.Config{Source: source, Target: target,
		Slot: "app", CreateSlot: true, Publications: []string{"app"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Stop()
	// ... write on the source ...
	if err := r.WaitCaughtUp(ctx); err != nil {
		fmt.Println(err)
		return
	}
	// ... every transaction committed on the source is now on the target.
}

// Without a Runner (the applier runs elsewhere: another process, a
// container), WaitCaughtUp needs a deadline, since it cannot tell that the
// applier stopped.
func ExampleWaitCaughtUp() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := apply.WaitCaughtUp(ctx, "postgres://postgres@127.0.0.1:5432/app?sslmode=disable", "app")
	if err != nil {
		fmt.Println(err)
	}
}
