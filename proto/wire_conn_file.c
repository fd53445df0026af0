/* wire_conn_file.c - payload pieces sent straight from a file
 * (wire_conn_send_file), the queue that keeps every write of the
 * connection in order behind them, and the cipher steps each queued item
 * owes (wire_item_seal). Part of the ws_wire library.
 *
 * Why: an upload's piece lies in a file. In clear, sendfile(2) hands its
 * page-cache pages to the socket with no copy through user memory; sealed,
 * it is read into one buffer, encrypted there and sent. Either way the
 * piece costs no read of its own on a worker and no loop wake-up: one job
 * writes several pieces (docs/benchmarks.md, "Cost per byte").
 *
 * Where the writes run: reading a file may wait for the disk, and the loop
 * thread never waits for the disk. Nothing that would tell whether a range
 * is resident is open to the daemon under its unit's system-call filter
 * (mincore and cachestat are outside @system-service), so every write of
 * the queue runs on a libuv worker: a job writes a batch of queued items
 * in order to a dup of the socket (non-blocking, so the worker never waits
 * for the network): frames and raw pieces with send (MSG_MORE while more of
 * the batch follows, so a piece's CHUNK header and its tag share its
 * segments), clear file pieces with sendfile, sealed ones through the
 * connection's scratch buffer (pread, encrypt in place, send). A job
 * returns when its batch is written, when the socket is full (EAGAIN) or
 * on an error. Back on the loop, written items complete (their done
 * callbacks run there, never on the worker); after EAGAIN a uv_poll on the
 * dup waits for the socket to take more (TCP_NOTSENT_LOWAT makes
 * "writable" mean "less unsent than the connection's limit",
 * wire_conn_rate.c) before the next job. A batch is at most
 * WIRE_FILE_BATCH_ITEMS items and about WIRE_FILE_BATCH_BYTES, so the caller's
 * next pieces keep coming while the socket drains.
 *
 * Order: the first file piece waits until libuv's own write queue is empty
 * (all its bytes are in the kernel). From then on every write of the
 * connection (frames, raw pieces, file pieces) joins this queue, and the
 * loop writes nothing itself until the queue is empty again. A sealed
 * payload's cipher (its AEAD stream: begin at the header, each piece, the
 * tag) is run by whoever writes the item, in stream order: the loop thread
 * touches it only while the queue is empty (no job runs), the worker only
 * for the items of its batch.
 *
 * Close: the job writes to its own dup, so the stream may close under it;
 * the struct waits for the job to return and for wpoll to close
 * (wire_file_close counts them), the dup closes with the struct, and queued
 * items get their done callbacks (UV_ECANCELED) before on_close.
 *
 * sendfile raises SIGPIPE on a connection the other side reset: a process
 * that sends files ignores SIGPIPE (p2pd does).
 *
 * Thread: loop thread, except file_work (a worker), which touches only the
 * batch's items, the AEAD context, the scratch buffer and the job's result
 * fields.
 */
#include "wire_conn-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

/* One job writes at most this many items, and stops taking more once it
 * holds this many bytes (TCP_NOTSENT_LOWAT limits what the socket takes
 * per job anyway on a slow link). */
#define WIRE_FILE_BATCH_ITEMS 64u
#define WIRE_FILE_BATCH_BYTES (4u * 1024u * 1024u)
/* A sealed file piece is read, encrypted and sent this much at a time. */
#define WIRE_FILE_SCRATCH_BYTES (256u * 1024u)

static void file_pump(wire_conn_t *c);

bool wire_file_queue_busy(const wire_conn_t *c) {
  return c->fq_head != NULL;
}

const uint8_t *wire_item_bytes(const wire_item_t *it) {
  return it->sealed != NULL ? it->sealed
         : it->raw != NULL  ? (const uint8_t *)it->raw
                            : it->pb.data;
}

int wire_item_seal(wire_conn_t *c, wire_item_t *it) {
  uint8_t *out = it->inplace;
  int rc;

  if (it->sealed_done || (!it->aead_begin && (!it->seal || it->file)))
    return 0; /* file pieces are encrypted as they are read */
  it->sealed_done = true;
  if (it->aead_begin)
    return ws_payload_aead_begin(c->tx_aead, it->aead_seq, it->pb.data);
  if (out == NULL && (out = it->sealed = malloc(it->dlen)) == NULL)
    return -ENOMEM;
  rc = ws_payload_aead_update(c->tx_aead, it->raw, out, it->dlen);
  if (rc == 0 && it->last)
    rc = ws_payload_aead_final(c->tx_aead, it->tag);
  return rc;
}

/* [worker] One send of the bytes from p (MSG_MORE while more follow). */
static ssize_t file_send(wire_conn_t *c, const uint8_t *p, size_t n,
                         bool more) {
  return send(c->wfd, p, n,
              MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0));
}

/* [worker] Refills the scratch buffer with the next bytes of the sealed
 * file piece it, encrypted (and the tag after the payload's last byte). */
static int file_read_sealed(wire_conn_t *c, wire_item_t *it) {
  size_t n = it->dlen - it->enc;
  ssize_t r;

  if (n > WIRE_FILE_SCRATCH_BYTES)
    n = WIRE_FILE_SCRATCH_BYTES;
  c->scr_len = c->scr_pos = 0;
  if (n > 0) {
    do
      r = pread(it->fd, c->scr, n, (off_t)(it->foff + it->enc));
    while (r < 0 && errno == EINTR);
    if (r < 0)
      return -errno;
    if ((size_t)r != n)
      return WS_ETRUNCATED; /* the file ends before the piece */
    int rc = ws_payload_aead_update(c->tx_aead, c->scr, c->scr, n);
    if (rc < 0)
      return rc;
    it->enc += n;
    c->scr_len = n;
  }
  if (it->enc == it->dlen && it->last) {
    int rc = ws_payload_aead_final(c->tx_aead, c->scr + c->scr_len);
    if (rc < 0)
      return rc;
    c->scr_len += WS_PAYLOAD_TAG_LEN;
  }
  return 0;
}

/* [worker] Sends the next bytes of it: 0 or more sent (*sent), -EAGAIN, or
 * an error. */
static int file_send_some(wire_conn_t *c, wire_item_t *it, bool more,
                          size_t *sent) {
  ssize_t r;

  *sent = 0;
  if (it->file && !it->seal) {
    off_t off = (off_t)(it->foff + it->sent);
    r = sendfile(c->wfd, it->fd, &off, it->len - it->sent);
    if (r == 0)
      return WS_ETRUNCATED; /* the file ends before the piece */
  } else if (it->file) {
    if (c->scr_pos == c->scr_len) {
      int rc = file_read_sealed(c, it);
      if (rc < 0)
        return rc;
    }
    bool rest = it->sent + (c->scr_len - c->scr_pos) < it->len;
    r = file_send(c, c->scr + c->scr_pos, c->scr_len - c->scr_pos,
                  more || rest);
    if (r > 0)
      c->scr_pos += (size_t)r;
  } else if (it->sent < it->dlen) {
    r = file_send(c, wire_item_bytes(it) + it->sent, it->dlen - it->sent,
                  more || it->len > it->dlen);
  } else {
    r = file_send(c, it->tag + (it->sent - it->dlen), it->len - it->sent, more);
  }
  if (r > 0) {
    *sent = (size_t)r;
    return 0;
  }
  if (r == 0)
    return -EIO; /* nothing to send: never for a piece not yet done */
  if (errno == EINTR)
    return 0;
  return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

/* [worker] Writes what is left of it: 0 when all of it went, -EAGAIN when
 * the socket is full, or an error. */
static int file_write_item(wire_conn_t *c, wire_item_t *it, bool more) {
  int rc = wire_item_seal(c, it);

  while (rc == 0 && it->sent < it->len) {
    size_t n;
    rc = file_send_some(c, it, more, &n);
    it->sent += n;
    c->fq_progress |= n > 0;
  }
  return rc;
}

/* [worker] The batch, in order. The last item's next is never read: the
 * loop may be appending behind it. */
static void file_work(uv_work_t *req) {
  wire_conn_t *c = req->data;
  wire_item_t *it = c->fq_head;

  for (unsigned i = 0; i < c->fq_batch; i++) {
    bool more = i + 1 < c->fq_batch;
    int rc = file_write_item(c, it, more);
    if (rc == -EAGAIN) {
      c->fq_eagain = true;
      return;
    }
    if (rc != 0) {
      c->fq_err = rc;
      return;
    }
    if (more)
      it = it->next;
  }
}

/* Completes the written items at the head (their done callbacks may send
 * more: those queue, and the pump after this starts them). */
static void file_complete(wire_conn_t *c, unsigned batch) {
  c->fq_completing = true;
  for (unsigned i = 0; i < batch && c->state != WC_CLOSING; i++) {
    wire_item_t *it = c->fq_head;
    if (it == NULL || it->sent < it->len)
      break;
    c->fq_head = it->next;
    if (c->fq_head == NULL)
      c->fq_tail = NULL;
    if (it->file && !it->seal)
      c->file_bytes += it->len;
    wire_io_item_written(c, it, 0);
  }
  c->fq_completing = false;
}

static void file_on_writable(uv_poll_t *h, int status, int events) {
  wire_conn_t *c = h->data;

  (void)events;
  uv_poll_stop(h);
  c->fq_wait = false;
  if (status < 0) {
    wire_conn_close(c, status);
    return;
  }
  file_pump(c);
}

static void file_after(uv_work_t *req, int status) {
  wire_conn_t *c = req->data;
  unsigned batch = c->fq_batch;
  int rc;

  c->fq_job = false;
  c->fq_batch = 0;
  if (c->state == WC_CLOSING) {
    wire_conn_closed_one(c); /* the close counted this job */
    return;
  }
  if (c->fq_progress)
    c->last_io_ms = uv_now(c->loop);
  file_complete(c, batch);
  if (c->state == WC_CLOSING)
    return;
  rc = status < 0 ? status : c->fq_err;
  if (rc < 0) {
    wire_conn_close(c, rc);
    return;
  }
  if (c->fq_eagain && c->fq_head != NULL) {
    rc = uv_poll_start(&c->wpoll, UV_WRITABLE, file_on_writable);
    if (rc < 0) {
      wire_conn_close(c, rc);
      return;
    }
    c->fq_wait = true;
    c->st.send_waits++;
  } else {
    file_pump(c);
  }
  wire_io_after_writes(c);
}

/* Starts a job for the items at the head, unless one runs, the socket is
 * full, or libuv still holds bytes of earlier writes. */
static void file_pump(wire_conn_t *c) {
  size_t bytes = 0;
  unsigned n = 0;
  int rc;

  if (c->fq_head == NULL || c->fq_job || c->fq_wait || c->fq_completing ||
      c->state == WC_CLOSING)
    return;
  if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0)
    return; /* io_on_write kicks again */
  for (wire_item_t *it = c->fq_head;
       it != NULL && n < WIRE_FILE_BATCH_ITEMS && bytes < WIRE_FILE_BATCH_BYTES;
       it = it->next) {
    bytes += it->len - it->sent;
    n++;
  }
  c->fq_batch = n;
  c->fq_err = 0;
  c->fq_eagain = false;
  c->fq_progress = false;
  c->fq_job = true;
  c->fq_work.data = c;
  rc = uv_queue_work(c->loop, &c->fq_work, file_work, file_after);
  if (rc < 0) {
    c->fq_job = false;
    wire_conn_close(c, rc);
  }
}

void wire_file_kick(wire_conn_t *c) {
  file_pump(c);
}

void wire_file_enqueue(wire_conn_t *c, wire_item_t *it) {
  it->next = NULL;
  it->sent = 0;
  if (c->fq_tail != NULL)
    c->fq_tail->next = it;
  else
    c->fq_head = it;
  c->fq_tail = it;
  file_pump(c);
}

/* The dup of the socket the jobs write to and wpoll watches, made with the
 * connection's first file piece; and, for a sealed session, the scratch
 * buffer its pieces are read and encrypted in. */
static int file_setup(wire_conn_t *c) {
  uv_os_fd_t fd;
  int d, rc;

  if (c->sess.sealed && c->scr == NULL &&
      (c->scr = malloc(WIRE_FILE_SCRATCH_BYTES + WS_PAYLOAD_TAG_LEN)) == NULL)
    return -ENOMEM;
  if (c->fq_poll_inited)
    return 0;
  rc = uv_fileno((uv_handle_t *)&c->tcp, &fd);
  if (rc < 0)
    return rc;
  d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0)
    return -errno;
  rc = uv_poll_init_socket(c->loop, &c->wpoll, d);
  if (rc < 0) {
    close(d);
    return rc;
  }
  c->wpoll.data = c;
  c->wfd = d;
  c->fq_poll_inited = true;
  return 0;
}

int wire_conn_send_file(wire_conn_t *c, int fd, uint64_t off, size_t len,
                        wire_conn_raw_cb done, void *arg) {
  wire_item_t *it;
  int rc;

  if (c->state != WC_OPEN && c->state != WC_GOODBYE)
    return -ENOTCONN;
  if (fd < 0 || done == NULL || len == 0 || len > c->payload_left ||
      len > UINT32_MAX || off > (uint64_t)INT64_MAX - len)
    return WS_EUSAGE;
  rc = file_setup(c);
  it = rc < 0 ? NULL : calloc(1, sizeof(*it));
  if (it == NULL) {
    rc = rc < 0 ? rc : -ENOMEM;
    wire_conn_close(c, rc); /* the payload is open and cannot go on */
    return rc;
  }
  it->c = c;
  it->file = true;
  it->fd = fd;
  it->foff = off;
  it->dlen = it->len = len;
  it->done = done;
  it->arg = arg;
  if (c->sess.sealed) {
    it->seal = true;
    it->last = len == c->payload_left;
    it->len += it->last ? WS_PAYLOAD_TAG_LEN : 0;
  }
  c->st.sendq_bytes += it->len;
  c->st.sendq_file_bytes += it->len; /* not held: no drain owed */
  c->payload_left -= len;
  wire_file_enqueue(c, it);
  if (c->payload_left == 0)
    wire_io_payload_done(c);
  return 0;
}

static void file_on_poll_closed(uv_handle_t *h) {
  wire_conn_closed_one(h->data);
}

unsigned wire_file_close(wire_conn_t *c) {
  unsigned n = 0;

  c->fq_wait = false;
  if (c->fq_poll_inited) {
    uv_close((uv_handle_t *)&c->wpoll, file_on_poll_closed);
    n++;
  }
  if (c->fq_job)
    n++;
  return n;
}

void wire_file_cancel_all(wire_conn_t *c) {
  wire_item_t *it;

  while ((it = c->fq_head) != NULL) {
    c->fq_head = it->next;
    wire_io_item_written(c, it, UV_ECANCELED);
  }
  c->fq_tail = NULL;
}
