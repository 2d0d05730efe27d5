package apply

import "github.com/walapply/walapply/apply/internal/initcopy"

// workerOriginName is initcopy.WorkerOriginName, the one rule naming the
// replication origins of an applier's workers, for the parallel streaming
// workers (stream_parallel_origin.go); the copy workers' are
// initcopy.OriginName.
func workerOriginName(prefix, applier string, id int) string {
	return initcopy.WorkerOriginName(prefix, applier, id)
}

// isWorkerOriginOf is initcopy.IsWorkerOriginOf.
func isWorkerOriginOf(prefix, applier, origin string) bool {
	return initcopy.IsWorkerOriginOf(prefix, applier, origin)
}
