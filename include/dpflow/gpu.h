/*
 * The GPU target (../shared DESIGN.md §4), host side: devices, memory,
 * packet queues fed by a CPU proxy, semaphores and persistent kernels
 * (lib/gpu/core), and pipe graphs run on the GPU (lib/gpu/flow). Built when
 * nvcc is found (DPFLOW_HAVE_GPU); every call reports a missing or failing
 * GPU as an error (struct dpflow_error naming the CUDA error), never a
 * crash. docs/gpu.md explains the model next to DOCA GPUNetIO's.
 *
 * Threads: a struct dpflow_gpu may be used from any thread; a queue's host
 * side belongs to its proxy while the proxy runs; a kernel handle and a
 * semaphore's host calls may be used from any one thread at a time.
 * Device code uses the objects through include/dpflow/gpu_dev.cuh.
 *
 * Waits are bounded everywhere: stopping a kernel, waiting for a copy and
 * stopping the proxy take a timeout or finish on their own; a kernel that
 * faults is reported (its CUDA error string in @err) and everything around
 * it still shuts down.
 */
#ifndef DPFLOW_GPU_H
#define DPFLOW_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "dpflow/error.h"
#include "dpflow/pool.h"
#include "dpflow/port.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Number of usable CUDA devices (0 when there is none, the driver is
 * missing or the runtime fails); @err, when not NULL, says why on 0.
 */
int dpflow_gpu_count(struct dpflow_error *err);

/* ---- devices ---------------------------------------------------------- */

struct dpflow_gpu;

/*
 * Open CUDA device @dev (0..count-1): creates its context on this thread.
 * NULL + @err (ENODEV: no such device or no driver, with CUDA's words).
 */
struct dpflow_gpu *dpflow_gpu_open(int dev, struct dpflow_error *err);
/* Unregister what is still registered and close. NULL ok. */
void dpflow_gpu_close(struct dpflow_gpu *gpu);
/* Device name ("NVIDIA H200") and ordinal. */
const char *dpflow_gpu_name(const struct dpflow_gpu *gpu);
int dpflow_gpu_device(const struct dpflow_gpu *gpu);
/*
 * Make @gpu's device current on the calling thread (threads other than the
 * opener call this before launching their own work). 0 or -errno.
 */
int dpflow_gpu_bind_thread(struct dpflow_gpu *gpu, struct dpflow_error *err);

/* ---- memory ----------------------------------------------------------- */

enum dpflow_gpu_mem_type {
	DPFLOW_GPU_MEM_GPU = 0, /* device memory; no CPU pointer */
	DPFLOW_GPU_MEM_CPU_GPU, /* pinned host memory mapped into the device */
	DPFLOW_GPU_MEM_GPU_CPU, /* device memory mapped for the CPU: needs
				   GDRCopy; refused with -ENOTSUP */
};

/*
 * Allocate @size bytes aligned to @align (a power of two, 0 = 256),
 * zeroed. *@host_ptr gets the CPU address (NULL for MEM_GPU), *@dev_ptr the
 * device address. Returns 0 or -errno (-ENOMEM, -ENOTSUP for GPU_CPU).
 */
int dpflow_gpu_mem_alloc(struct dpflow_gpu *gpu, size_t size, size_t align,
			 enum dpflow_gpu_mem_type type, void **host_ptr,
			 void **dev_ptr, struct dpflow_error *err);
/* Free memory from dpflow_gpu_mem_alloc (either pointer). NULL ok. */
void dpflow_gpu_mem_free(struct dpflow_gpu *gpu, void *ptr);

/*
 * Register @pool's region as CPU_GPU memory (pinned and mapped) so that
 * kernels read and write its slots by index, over PCIe, with no copy (the
 * zero-copy data path). Idempotent. 0 or -errno.
 */
int dpflow_gpu_pool_register(struct dpflow_gpu *gpu, struct dpflow_pool *pool,
			     struct dpflow_error *err);
void dpflow_gpu_pool_unregister(struct dpflow_gpu *gpu,
				struct dpflow_pool *pool);
/*
 * A copy of @pool's data-path view whose base is the device address of
 * the registered region: pool.h's DPF_HD accessors (dpflow_pool_meta,
 * dpflow_pkt_data) then work in kernels. 0, or -ENOENT when not registered.
 */
int dpflow_gpu_pool_dev_view(const struct dpflow_gpu *gpu,
			     const struct dpflow_pool *pool,
			     struct dpflow_pool *view);

/* ---- packet queues ---------------------------------------------------- */

/*
 * A queue is a pair of descriptor rings in CPU_GPU memory, receive (CPU
 * produces, GPU consumes) and transmit (GPU produces, CPU consumes), and
 * the data path their packets take:
 *  - ZERO_COPY: the pool is registered; descriptors name pool slots and
 *    kernels touch the frames in host memory by index;
 *  - DEVICE: the proxy copies each receive burst into a ring of slots in
 *    device memory (one cudaMemcpyAsync per burst, then a doorbell copy
 *    ordered after it on the same stream), and copies the slots of
 *    transmitted packets back.
 * With hdr_split N > 0 only the first N bytes of each frame are given to
 * (and, on the DEVICE path, copied to) the GPU; the rest stays in host
 * memory untouched. The protocol is documented in gpu_dev.cuh.
 */
enum dpflow_gpu_path {
	DPFLOW_GPU_PATH_ZERO_COPY = 0,
	DPFLOW_GPU_PATH_DEVICE,
};

struct dpflow_gpu_queue_params {
	struct dpflow_pool *pool; /* packets' pool (registered on ZERO_COPY) */
	uint32_t size;		  /* descriptors per ring, power of two;
				     0 = 1024 */
	enum dpflow_gpu_path path;
	uint32_t hdr_split; /* 0: whole frames; else first N bytes only */
	uint32_t dev_slots; /* DEVICE: slots in the device ring; 0 = 2*size */
};

struct dpflow_gpu_queue;
/* Device handle of a queue (gpu_dev.cuh): pass it to kernels. */
struct dpflow_gpu_qdev;

struct dpflow_gpu_queue *
dpflow_gpu_queue_create(struct dpflow_gpu *gpu,
			const struct dpflow_gpu_queue_params *params,
			struct dpflow_error *err);
/* Free the queue (its proxy must be stopped). NULL ok. */
void dpflow_gpu_queue_destroy(struct dpflow_gpu_queue *q);
/* Device address of the queue's handle, for kernel arguments. */
struct dpflow_gpu_qdev *dpflow_gpu_queue_dev(struct dpflow_gpu_queue *q);

/* ---- the CPU proxy ---------------------------------------------------- */

struct dpflow_gpu_kernel;

/*
 * One thread that feeds @queue's receive ring from @rx_port
 * (dpflow_port_rx_burst) and drains its transmit ring into @tx_port
 * (dpflow_port_tx_burst), releasing each packet at its descriptor's send
 * time (TSC-paced) and recording the release error. Either port may be
 * NULL (no receive / transmitted packets are freed).
 */
struct dpflow_gpu_proxy_params {
	struct dpflow_gpu_queue *queue;
	struct dpflow_port *rx_port;
	uint16_t rx_queue;
	struct dpflow_port *tx_port;
	uint16_t tx_queue;
	uint16_t burst; /* 0 = 32, at most DPFLOW_BURST_MAX */
	/* optional: a kernel whose failure stops the proxy with its error */
	struct dpflow_gpu_kernel *watch;
};

struct dpflow_gpu_proxy_stats {
	uint64_t rx_pkts;      /* published to the receive ring */
	uint64_t rx_ring_full; /* bursts cut short: ring or device full */
	uint64_t tx_pkts;      /* accepted by tx_port */
	uint64_t tx_dropped;   /* verdict drop, or no tx_port: freed */
	uint64_t tx_errors;    /* bad descriptor, or port refused at stop */
	uint64_t copies_h2d;   /* DEVICE path: copy calls, each way */
	uint64_t copies_d2h;
	uint64_t timed;		  /* packets with a send time */
	uint64_t send_err_p50_ns; /* release time - send time */
	uint64_t send_err_p99_ns;
	uint64_t send_err_max_ns;
};

struct dpflow_gpu_proxy;

struct dpflow_gpu_proxy *
dpflow_gpu_proxy_start(const struct dpflow_gpu_proxy_params *params,
		       struct dpflow_error *err);
/*
 * 0 while running normally, else the negative errno that stopped it, with
 * the reason in @err (a CUDA error, the watched kernel's failure).
 */
int dpflow_gpu_proxy_error(struct dpflow_gpu_proxy *proxy,
			   struct dpflow_error *err);
/*
 * Stop and join the thread, then flush: ready transmit descriptors go out
 * at once, receive descriptors the GPU never took are freed. Stop the
 * kernels using the queue first. Returns the proxy's error (as above) or 0.
 * Frees the proxy. NULL ok.
 */
int dpflow_gpu_proxy_stop(struct dpflow_gpu_proxy *proxy,
			  struct dpflow_gpu_proxy_stats *stats,
			  struct dpflow_error *err);
/*
 * Counters now (read while running: approximate); the send-error
 * percentiles are filled only by dpflow_gpu_proxy_stop.
 */
void dpflow_gpu_proxy_stats_get(struct dpflow_gpu_proxy *proxy,
				struct dpflow_gpu_proxy_stats *stats);

/* ---- semaphores ------------------------------------------------------- */

/*
 * An array of items, each a state and a payload of payload_size bytes,
 * shared by kernels (MEM_GPU) or by kernels and the CPU (MEM_CPU_GPU).
 * Setting a state publishes the payload written before it (release);
 * reading one makes the payload written before it visible (acquire).
 */
enum dpflow_gpu_sem_state {
	DPFLOW_GPU_SEM_FREE = 0,
	DPFLOW_GPU_SEM_READY,
	DPFLOW_GPU_SEM_DONE,
	DPFLOW_GPU_SEM_HOLD,
	DPFLOW_GPU_SEM_ERROR,
	DPFLOW_GPU_SEM_EXIT,
};

struct dpflow_gpu_sem;
struct dpflow_gpu_sem_dev; /* device handle (gpu_dev.cuh) */

struct dpflow_gpu_sem *dpflow_gpu_sem_create(struct dpflow_gpu *gpu,
					     uint32_t n_items,
					     uint32_t payload_size,
					     enum dpflow_gpu_mem_type type,
					     struct dpflow_error *err);
void dpflow_gpu_sem_destroy(struct dpflow_gpu_sem *sem);
struct dpflow_gpu_sem_dev *dpflow_gpu_sem_dev(struct dpflow_gpu_sem *sem);
/* A set of states for the wait calls: DPFLOW_GPU_SEM_BIT(READY) | ... */
#define DPFLOW_GPU_SEM_BIT(state) (1u << (state))

/*
 * CPU access (MEM_CPU_GPU semaphores only; -ENOTSUP otherwise). get
 * returns the state (>= 0) or -errno; wait polls until the item's state is
 * in @states (a DPFLOW_GPU_SEM_BIT mask) and returns it, or returns
 * -ETIMEDOUT once @timeout_ns has passed.
 */
int dpflow_gpu_sem_get(struct dpflow_gpu_sem *sem, uint32_t item);
int dpflow_gpu_sem_set(struct dpflow_gpu_sem *sem, uint32_t item,
		       enum dpflow_gpu_sem_state state);
int dpflow_gpu_sem_wait(struct dpflow_gpu_sem *sem, uint32_t item,
			uint32_t states, uint64_t timeout_ns);
/* CPU address of an item's payload (NULL for MEM_GPU or out of range). */
void *dpflow_gpu_sem_payload(struct dpflow_gpu_sem *sem, uint32_t item);

/* ---- persistent kernels and CUDA graphs ------------------------------- */

/*
 * A kernel handle: a stream of its own and a control block (struct
 * dpflow_gpu_kctl, CPU_GPU memory) whose device address the kernel takes
 * as an argument and polls (dpflow_gpu_dev_exit) until
 * dpflow_gpu_kernel_stop raises its exit flag.
 *
 * Kernels that wait on each other must all be loaded before the first one
 * spins: dpflow_gpu_count/dpflow_gpu_open set CUDA_MODULE_LOADING=EAGER
 * (unless it is set) before the process's first CUDA call. A program that
 * calls CUDA before them should set it itself; with lazy loading the
 * second kernel's first launch waits for the first kernel to end.
 */
struct dpflow_gpu_kctl;

struct dpflow_gpu_kernel *dpflow_gpu_kernel_create(struct dpflow_gpu *gpu,
						   const char *name,
						   struct dpflow_error *err);
/* Device address of the control block, for the kernel's arguments. */
struct dpflow_gpu_kctl *dpflow_gpu_kernel_ctl(struct dpflow_gpu_kernel *k);
/*
 * Launch @func (a __global__ function) with @grid x @block threads, @smem
 * bytes of dynamic shared memory and @args (as cudaLaunchKernel) on the
 * handle's stream; clears the exit flag first. A launch error is returned
 * (-EINVAL/-EIO) with CUDA's words in @err.
 */
int dpflow_gpu_kernel_launch(struct dpflow_gpu_kernel *k, const void *func,
			     unsigned grid, unsigned block, size_t smem,
			     void **args, struct dpflow_error *err);
/*
 * Capture the same launch as a CUDA graph (for short-lived work launched
 * again and again); run it with dpflow_gpu_kernel_graph_run.
 */
int dpflow_gpu_kernel_graph(struct dpflow_gpu_kernel *k, const void *func,
			    unsigned grid, unsigned block, size_t smem,
			    void **args, struct dpflow_error *err);
/* Launch the captured graph and wait up to @timeout_ns for it. */
int dpflow_gpu_kernel_graph_run(struct dpflow_gpu_kernel *k,
				uint64_t timeout_ns, struct dpflow_error *err);
/*
 * 1 while the launched work runs, 0 once it finished, -errno (with the
 * CUDA error string) if it failed.
 */
int dpflow_gpu_kernel_poll(struct dpflow_gpu_kernel *k,
			   struct dpflow_error *err);
/*
 * Raise the exit flag and wait up to @timeout_ns for the kernel to end.
 * 0, -ETIMEDOUT (the kernel ignores its flag: the handle then keeps its
 * memory until the process ends), or the kernel's failure as in _poll.
 */
int dpflow_gpu_kernel_stop(struct dpflow_gpu_kernel *k, uint64_t timeout_ns,
			   struct dpflow_error *err);
/* Stop (1 s bound) and free. NULL ok. */
void dpflow_gpu_kernel_destroy(struct dpflow_gpu_kernel *k);

#ifdef __cplusplus
}
#endif

#endif /* DPFLOW_GPU_H */
