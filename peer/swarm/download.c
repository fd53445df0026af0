/* download.c - one chunk arriving from a neighbour (download.h), on the
 * fetch layer's inbound-chunk machine.
 *
 *   RECEIVING --peer_download_end--> ENDED --inbound done--> reported, freed
 *
 * Owns: the inbound while it runs, then nothing. Thread: loop thread.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swarm/download.h"
#include "wire_conn.h"
#include "ws_log.h"

struct peer_download_s {
  peer_downloads_t *dls;
  peer_download_t *prev, *next; /* dls->head */
  peer_inbound_t *in;           /* NULL once done() ran */
  peer_file_t *file;            /* reference held */
  uint32_t j;
  int end_status;       /* what peer_download_end was given */
  void (*wake)(void *); /* NULL after peer_download_end */
  void *wake_arg;
  char node_id[WS_NODE_ID_MAX + 1]; /* for the ban */
  char host[64];
  uint16_t port;
  uint64_t t0_ns; /* taken (metrics: chunk fetch time) */
};

/* More of the chunk is written: uploads serving it as it arrives may send
 * more. */
static void download_progress(void *arg, uint64_t written) {
  peer_download_t *dl = arg;
  (void)written;
  peer_file_chunk_progress(dl->file, dl->j);
}

int peer_downloads_live(const peer_downloads_t *dls, const peer_file_t *file,
                        uint32_t j, uint64_t *written) {
  for (const peer_download_t *dl = dls->head; dl != NULL; dl = dl->next) {
    if (dl->file == file && dl->j == j && dl->in != NULL &&
        peer_inbound_status(dl->in) == 0) {
      *written = peer_inbound_written(dl->in);
      return 1;
    }
  }
  return 0;
}

static void download_wake(void *arg) {
  peer_download_t *dl = arg;
  if (dl->wake != NULL)
    dl->wake(dl->wake_arg);
}

/* Reports the outcome to the file and frees dl. WS_EDIGEST bans the sender
 * first; it is counted by the file (retries). A local disk error
 * (WS_ENOSPC, WS_EIO) is ours, not the sender's: it goes to the file as is
 * and fails it (and the releases waiting for it) instead of sending the
 * chunk round the neighbours for ever. Anything else from the network
 * side just gives the chunk back. */
static void download_report(peer_download_t *dl, int status,
                            const char *errmsg) {
  peer_downloads_t *dls = dl->dls;
  peer_file_t *file = dl->file;
  uint32_t j = dl->j;
  char sender[sizeof(dl->node_id)];
  memcpy(sender, dl->node_id, sizeof(sender));
  if (status == WS_EDIGEST)
    dls->ban(dls->arg, dl->node_id, dl->host, dl->port,
             "sent a chunk that failed its hash");
  file->rx_busy[j] = 0;
  if (status == 0) {
    uint64_t ns = uv_hrtime() - dl->t0_ns;
    dls->ctx->counters.chunks_from_peers++;
    ws_hist_observe(&dls->ctx->counters.chunk_peer_s, (double)ns / 1e9);
    WS_LOGD("chunk %u of %s from %s: whole %llu ms after its header", j,
            file->mf.name, dl->node_id, (unsigned long long)(ns / 1000000u));
  }
  assert(dls->alive > 0);
  dls->alive--;
  if (dl->prev != NULL)
    dl->prev->next = dl->next;
  else
    dls->head = dl->next;
  if (dl->next != NULL)
    dl->next->prev = dl->prev;
  free(dl);
  dls->sender = status == 0 ? sender : NULL;
  peer_file_chunk_done(file, j, PEER_SRC_PEER,
                       status == 0 || status == WS_EDIGEST ||
                               ws_err_is_disk(status)
                           ? status
                           : WS_ECANCELED,
                       errmsg);
  dls->sender = NULL;
  /* Uploads of the chunk as it arrived get the rest now, or fail. */
  peer_file_chunk_progress(file, j);
  peer_file_unref(file);
  dls->reported(dls->arg);
}

static void download_done(void *arg, int status, const char *errmsg) {
  peer_download_t *dl = arg;
  dl->in = NULL;
  /* Failures of the payload itself were the connection's to log, a disk
   * error is the file's; a store or verify error is worth a line here. */
  if (status != 0 && status != WS_EDIGEST && status != WS_ECANCELED &&
      status != WS_ETRUNCATED && status != dl->end_status &&
      !ws_err_is_disk(status))
    WS_LOGW("chunk %u of %s from %s: %s%s%s", dl->j, dl->file->mf.name,
            dl->node_id, ws_strerror(status), errmsg[0] != '\0' ? ": " : "",
            errmsg);
  download_report(dl, status, errmsg);
}

peer_download_t *peer_download_new(peer_downloads_t *dls, peer_file_t *file,
                                   uint32_t j, const char *node_id,
                                   const char *host, uint16_t port,
                                   void (*wake)(void *), void *wake_arg) {
  peer_download_t *dl = calloc(1, sizeof(*dl));
  if (dl == NULL)
    return NULL;
  dl->dls = dls;
  dl->file = file;
  dl->j = j;
  dl->wake = wake;
  dl->wake_arg = wake_arg;
  snprintf(dl->node_id, sizeof(dl->node_id), "%s", node_id);
  snprintf(dl->host, sizeof(dl->host), "%s", host);
  dl->port = port;
  dl->t0_ns = uv_hrtime();
  peer_inbound_ops_t ops = {
      .mode = PEER_INBOUND_RESERVE,
      .room = WIRE_READ_BUF_BYTES,
      .arg = dl,
      .wake = download_wake,
      .progress = download_progress,
      .done = download_done,
  };
  if (peer_inbound_new(dls->ctx, file, j, &ops, &dl->in) != 0) {
    free(dl);
    return NULL;
  }
  peer_file_ref(file);
  file->rx_busy[j] = 1;
  dls->alive++;
  dl->next = dls->head;
  if (dls->head != NULL)
    dls->head->prev = dl;
  dls->head = dl;
  peer_file_chunk_live(file, j); /* HAVE "p": served on as it arrives */
  return dl;
}

int peer_download_reserve(peer_download_t *dl) {
  return peer_inbound_reserve(dl->in);
}

int peer_download_data(peer_download_t *dl, const uint8_t *p, size_t len) {
  int rc = peer_inbound_data(dl->in, p, len);
  /* Our disk failed, not the link: the rest of the payload is read and
   * dropped, and the connection stays up for the other releases. */
  return ws_err_is_disk(rc) ? 0 : rc;
}

int peer_download_endgame(const peer_download_t *dl) {
  return dl->file->state == PEER_FILE_FETCHING &&
         peer_file_chunks_missing(dl->file) == 0;
}

void peer_download_end(peer_download_t *dl, int status) {
  dl->wake = NULL;
  dl->wake_arg = NULL;
  dl->end_status = status;
  peer_inbound_end(dl->in, status, NULL); /* may report and free dl */
}
