/* trk_swarm.c - swarm lifetime, membership and have-sets.
 *
 * Owns the swarm's per-chunk arrays and every trk_member_t of the swarm.
 * Members are separately allocated (stable pointers: the lease table and
 * the peers' join records point at them) and indexed by a dense pointer
 * array with swap-remove. Availability changes keep the need set exact
 * (see trk_swarm-int.h). Loop thread only.
 */
#include "trk_swarm-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void swarm_free_arrays(trk_swarm_t *s) {
  free(s->mview);
  free(s->members);
  free(s->lprev);
  free(s->lnext);
  free(s->suspect);
  free(s->vouched);
  free(s->loose);
  free(s->ever);
  free(s->need);
  free(s->first);
  free(s->holder);
  free(s->avail);
}

trk_swarm_t *trk_swarm_new(const ws_hash_t *digest, uint32_t total_chunks,
                           uint64_t now_ms) {
  if (digest == NULL || total_chunks == 0 || total_chunks > TRK_MAX_CHUNKS)
    return NULL;
  trk_swarm_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->digest = *digest;
  ws_digest_to_str(digest, s->digest_str);
  s->total = total_chunks;
  s->nwords = (uint32_t)TRK_BITS_WORDS(total_chunks);
  s->avail = calloc(total_chunks, sizeof(*s->avail));
  s->holder = calloc(total_chunks, sizeof(*s->holder));
  s->need = calloc(s->nwords, sizeof(*s->need));
  s->first = calloc(s->nwords, sizeof(*s->first));
  s->ever = calloc(s->nwords, sizeof(*s->ever));
  s->suspect = calloc(s->nwords, sizeof(*s->suspect));
  s->vouched = calloc(s->nwords, sizeof(*s->vouched));
  s->loose = calloc(s->nwords, sizeof(*s->loose));
  s->lnext = malloc((size_t)total_chunks * sizeof(*s->lnext));
  s->lprev = malloc((size_t)total_chunks * sizeof(*s->lprev));
  s->lhead = s->ltail = TRK_LEASE_NIL;
  s->max_members = TRK_MAX_MEMBERS;
  s->members_cap = 8;
  s->members = calloc(s->members_cap, sizeof(*s->members));
  s->mview = calloc(s->members_cap, sizeof(*s->mview));
  if (s->mview == NULL || s->avail == NULL || s->holder == NULL ||
      s->need == NULL || s->first == NULL || s->ever == NULL ||
      s->suspect == NULL || s->vouched == NULL || s->loose == NULL ||
      s->lnext == NULL || s->lprev == NULL || s->members == NULL)
    goto fail;
  /* Nobody holds anything yet: every chunk needs the origin. */
  for (uint32_t i = 0; i < total_chunks; i++)
    trk_bits_set(s->need, i);
  s->need_count = total_chunks;
  s->created_ms = now_ms;
  if (trk_stats_swarm_init(s) < 0)
    goto fail;
  return s;

fail:
  swarm_free_arrays(s);
  free(s);
  return NULL;
}

void trk_swarm_free(trk_swarm_t *s) {
  if (s == NULL)
    return;
  while (s->nmembers > 0)
    trk_swarm_leave(s, s->members[s->nmembers - 1u]);
  trk_stats_swarm_free(s);
  swarm_free_arrays(s);
  free(s);
}

const ws_hash_t *trk_swarm_digest(const trk_swarm_t *s) {
  return &s->digest;
}

const char *trk_swarm_digest_str(const trk_swarm_t *s) {
  return s->digest_str;
}

uint32_t trk_swarm_total_chunks(const trk_swarm_t *s) {
  return s->total;
}

uint32_t trk_swarm_member_count(const trk_swarm_t *s) {
  return s->nmembers;
}

const char *trk_swarm_uri(const trk_swarm_t *s) {
  return s->uri;
}

int trk_swarm_set_uri(trk_swarm_t *s, const char *uri) {
  size_t n = strnlen(uri, TRK_URI_MAX + 1);
  if (n > TRK_URI_MAX)
    return WS_EUSAGE;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)uri[i];
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\')
      return WS_EUSAGE;
  }
  memcpy(s->uri, uri, n);
  s->uri[n] = '\0';
  return 0;
}

/* The member record itself: the struct and its have-bitfield. */
static size_t member_alloc_bytes(const trk_swarm_t *s) {
  return sizeof(trk_member_t) + (size_t)s->nwords * sizeof(uint64_t);
}

size_t trk_swarm_member_bytes(const trk_swarm_t *s) {
  /* Room for the dashboard ring too: allocated only while the member
   * gains chunks, but any member may start to at any time; and its
   * entries in the swarm's members[] and mview[], which grow by doubling
   * (room for twice the members at most). */
  return member_alloc_bytes(s) + trk_stats_member_ring_bytes() +
         2u * (sizeof(trk_member_t *) + sizeof(trk_mview_t));
}

size_t trk_swarm_fixed_bytes(void) {
  return sizeof(trk_swarm_t) + trk_stats_swarm_bytes() +
         8u * (sizeof(trk_member_t *) + sizeof(trk_mview_t));
}

/* Keeps mview's holds and rich in step with m's have_count and counted. */
static void mview_holds(trk_swarm_t *s, const trk_member_t *m) {
  trk_mview_t *v = &s->mview[m->idx];
  v->holds = m->have_count > 0 && m->counted;
  v->rich = v->holds &&
            (uint64_t)m->have_count * TRK_RICH_SHARE_DIV >= (uint64_t)s->total;
}

/* Adds (add != 0) or removes m's contribution to the complete and
 * downloader counters; bracket every role or have_count change. */
static void member_account(trk_swarm_t *s, const trk_member_t *m, int add) {
  uint32_t complete = m->have_count == s->total;
  uint32_t down = (uint32_t)trk_member_is_downloader(s, m);
  if (add) {
    mview_holds(s, m);
    s->complete += complete;
    s->downloaders += down;
  } else {
    s->complete -= complete;
    s->downloaders -= down;
  }
}

static void avail_inc(trk_swarm_t *s, uint32_t c) {
  if (s->avail[c]++ != 0)
    return;
  s->held_chunks++;
  trk_bits_set(s->ever, c);
  if (trk_bits_get(s->need, c)) {
    trk_bits_clear(s->need, c);
    s->need_count--;
  }
}

/* Leases of others on chunks m claims end (revoked): a believed claim
 * means the chunk is not fetched from the origin again. */
static void claims_revoke(trk_swarm_t *s, const trk_member_t *m, uint32_t c) {
  trk_member_t *h = s->holder[c];
  if (h != NULL && h != m)
    trk_lease_end_chunk(s, c, TRK_LEASE_END_REVOKED);
}

static void avail_dec(trk_swarm_t *s, uint32_t c) {
  trk_bits_clear(s->vouched, c); /* its deliverer may be the one leaving */
  if (--s->avail[c] != 0)
    return;
  s->held_chunks--;
  trk_suspect_clear(s, c); /* nobody claims it: an ordinary need now */
  if (s->holder[c] == NULL) {
    /* The last holder is gone and no one is fetching it: without the
     * origin the swarm could never finish, so it is leasable again. */
    trk_bits_set(s->need, c);
    s->need_count++;
    if (c < s->need_lo)
      s->need_lo = c;
  }
}

int trk_swarm_join(trk_swarm_t *s, trk_peer_t *peer, trk_role_t role,
                   uint64_t now_ms, trk_member_t **out) {
  int rc;
  if (role >= TRK_ROLE_LAST)
    return WS_EUSAGE;
  if (trk_peer_join_find(peer, s) != NULL)
    return WS_EEXISTS;
  if (s->nmembers >= s->max_members || peer->njoined >= peer->max_joined)
    return WS_ELIMIT;
  if (s->nmembers == s->members_cap) {
    uint32_t cap = s->members_cap * 2u;
    if (cap > s->max_members)
      cap = s->max_members;
    trk_member_t **v = realloc(s->members, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    s->members = v;
    trk_mview_t *mv = realloc(s->mview, cap * sizeof(*mv));
    if (mv == NULL)
      return -ENOMEM; /* members grew: harmless, next join retries */
    s->mview = mv;
    s->members_cap = cap;
  }
  trk_member_t *m = calloc(1, member_alloc_bytes(s));
  if (m == NULL)
    return -ENOMEM;
  m->peer = peer;
  m->role = role;
  m->joined_ms = now_ms;
  m->counted = true; /* believed until weighed (trk_swarm_weigh) */
  s->now_ms = now_ms;
  rc = trk_peer_join_add(peer, s, m);
  if (rc < 0)
    goto fail_member;
  m->idx = s->nmembers;
  s->members[s->nmembers++] = m;
  s->mview[m->idx].named = 0;
  trk_swarm_member_refresh(s, m);
  member_account(s, m, 1);
  trk_stats_member_join(s, m, now_ms);
  *out = m;
  return 0;

fail_member:
  free(m);
  return rc;
}

void trk_swarm_leave(trk_swarm_t *s, trk_member_t *m) {
  trk_stats_member_leave(s, m);
  /* Leases first: with the chunk still unheld they return to need. */
  while (m->nleases > 0)
    trk_lease_end_slot(s, m, m->nleases - 1u, TRK_LEASE_END_RELEASED);
  member_account(s, m, 0);
  for (uint32_t w = 0; w < s->nwords && m->counted; w++) {
    uint64_t bits = m->have[w];
    while (bits != 0) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      avail_dec(s, c);
    }
  }
  if (!m->counted)
    s->uncounted--;
  trk_peer_join_del(m->peer, s);
  uint32_t last = s->nmembers - 1u;
  if (m->idx != last) {
    s->members[m->idx] = s->members[last];
    s->mview[m->idx] = s->mview[last];
    s->members[m->idx]->idx = m->idx;
  }
  s->nmembers--;
  free(m);
}

void trk_swarm_member_refresh(trk_swarm_t *s, const trk_member_t *m) {
  trk_mview_t *v = &s->mview[m->idx];
  v->peer = m->peer;
  v->zone_hash = m->peer->zone_hash;
  v->port = m->peer->port;
}

trk_member_t *trk_swarm_member_of(trk_swarm_t *s, trk_peer_t *peer) {
  trk_peer_join_t *j = trk_peer_join_find(peer, s);
  return j == NULL ? NULL : j->member;
}

/* ---- weighing of claims (docs/tracker.md "Weighing have-claims") ------ */

/* m's claims count again: its chunks leave the need set, and leases
 * others took on them while they did not count end. */
static void member_count(trk_swarm_t *s, trk_member_t *m) {
  if (m->counted)
    return;
  m->counted = true;
  s->uncounted--;
  mview_holds(s, m);
  for (uint32_t w = 0; w < s->nwords; w++) {
    uint64_t bits = m->have[w];
    while (bits != 0) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      avail_inc(s, c);
      claims_revoke(s, m, c);
    }
  }
}

/* m's claims stop counting: chunks only it claims need the origin. */
static void member_uncount(trk_swarm_t *s, trk_member_t *m) {
  if (!m->counted)
    return;
  m->counted = false;
  s->uncounted++;
  mview_holds(s, m);
  s->n_distrusted++;
  uint32_t need = s->need_count;
  for (uint32_t w = 0; w < s->nwords; w++) {
    uint64_t bits = m->have[w];
    while (bits != 0) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1u;
      avail_dec(s, c);
    }
  }
  if (s->need_count > need)
    s->regrant = true;
}

/* m is believed for at least another ms from now (on trial only). */
static void member_believe(trk_swarm_t *s, trk_member_t *m, uint32_t ms) {
  if (m->believed_ms != 0 && m->believed_ms < s->now_ms + ms)
    m->believed_ms = s->now_ms + ms;
  member_count(s, m);
}

void trk_swarm_weigh(trk_swarm_t *s, uint64_t now_ms) {
  s->now_ms = now_ms;
  for (uint32_t i = 0; i < s->nmembers; i++) {
    trk_member_t *m = s->members[i];
    uint32_t others = s->downloaders - (uint32_t)trk_member_is_downloader(s, m);
    if (others == 0) {
      /* Nobody else asks for anything: nothing to weigh, and the trial
       * starts afresh when a downloader comes. */
      m->believed_ms = 0;
      member_count(s, m);
      continue;
    }
    if (m->have_count == 0)
      continue; /* claims nothing yet */
    if (m->believed_ms == 0)
      m->believed_ms = now_ms + TRK_CLAIM_GRACE_MS; /* the trial starts */
    if (now_ms >= m->believed_ms)
      member_uncount(s, m);
  }
}

void trk_swarm_confirm(trk_swarm_t *s, trk_member_t *m, uint64_t now_ms) {
  s->now_ms = now_ms;
  s->n_confirms++;
  m->confirmed_ms = now_ms;
  member_believe(s, m, TRK_CLAIM_CONFIRM_MS);
}

void trk_swarm_set_now(trk_swarm_t *s, uint64_t now_ms) {
  s->now_ms = now_ms;
}

int trk_member_counted(const trk_member_t *m) {
  return m->counted;
}

int trk_swarm_regrant(trk_swarm_t *s, int clear) {
  int r = s->regrant;
  if (clear)
    s->regrant = false;
  return r;
}

void trk_swarm_mark_regrant(trk_swarm_t *s) {
  s->regrant = true;
}

/* Sets have-bit c of m (not set before) and settles the lease on c. */
static void have_set(trk_swarm_t *s, trk_member_t *m, uint32_t c) {
  int peak = 0;
  trk_bits_set(m->have, c);
  m->have_count++;
  if (m->have_count > m->peak_have) {
    m->peak_have = m->have_count;
    peak = 1;
  }
  if (m->counted)
    avail_inc(s, c);
  trk_member_t *h = s->holder[c];
  if (h == NULL)
    return;
  if (h == m) {
    m->origin_chunks++;
    trk_lease_end_chunk(s, c, TRK_LEASE_END_COMPLETED);
    /* It fetched from the origin a chunk we leased it and it never
     * claimed before: others need a moment to get it from m and confirm
     * m. A chunk claimed again after dropping it earns nothing. */
    if (peak)
      member_believe(s, m, TRK_CLAIM_GRACE_MS);
  } else if (m->counted) {
    /* Someone else already delivered the chunk (e.g. it fell back to S3
     * while the tracker was unreachable): the lease is moot, free the
     * holder's slot for a chunk that is still needed. A claim that does
     * not count revokes nothing. */
    trk_lease_end_chunk(s, c, TRK_LEASE_END_REVOKED);
  }
}

static void have_clear(trk_swarm_t *s, trk_member_t *m, uint32_t c) {
  trk_bits_clear(m->have, c);
  m->have_count--;
  if (m->counted)
    avail_dec(s, c);
}

int trk_swarm_add_have(trk_swarm_t *s, trk_member_t *m, uint32_t chunk) {
  if (chunk >= s->total)
    return WS_EBADMSG;
  if (trk_bits_get(m->have, chunk))
    return 0;
  member_account(s, m, 0);
  have_set(s, m, chunk);
  member_account(s, m, 1);
  return 0;
}

int trk_swarm_set_have(trk_swarm_t *s, trk_member_t *m, const uint8_t *bits,
                       size_t nbytes) {
  if (bits == NULL || nbytes != ((size_t)s->total + 7u) / 8u)
    return WS_EBADMSG;
  uint64_t *next = malloc((size_t)s->nwords * sizeof(uint64_t));
  if (next == NULL)
    return -ENOMEM;
  trk_bits_load_msb(next, s->total, bits);
  member_account(s, m, 0);
  for (uint32_t w = 0; w < s->nwords; w++) {
    uint64_t gained = next[w] & ~m->have[w];
    uint64_t lost = m->have[w] & ~next[w];
    while (gained != 0) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(gained);
      gained &= gained - 1u;
      have_set(s, m, c);
    }
    while (lost != 0) {
      uint32_t c = w * 64u + (uint32_t)__builtin_ctzll(lost);
      lost &= lost - 1u;
      have_clear(s, m, c);
    }
  }
  member_account(s, m, 1);
  free(next);
  return 0;
}

void trk_swarm_set_role(trk_swarm_t *s, trk_member_t *m, trk_role_t role) {
  if (role >= TRK_ROLE_LAST || role == m->role)
    return;
  member_account(s, m, 0);
  m->role = role;
  member_account(s, m, 1);
  /* A seed fetches nothing from the origin. */
  if (role == TRK_ROLE_SEED)
    while (m->nleases > 0)
      trk_lease_end_slot(s, m, m->nleases - 1u, TRK_LEASE_END_RELEASED);
}

void trk_swarm_stats(const trk_swarm_t *s, trk_swarm_stats_t *out) {
  memset(out, 0, sizeof(*out));
  out->total_chunks = s->total;
  out->members = s->nmembers;
  out->complete = s->complete;
  out->downloaders = s->downloaders;
  out->chunks_held = s->held_chunks;
  out->chunks_leased = s->leased;
  out->chunks_need = s->need_count;
  out->leases_granted = s->n_granted;
  out->leases_completed = s->n_completed;
  out->leases_expired = s->n_expired;
  out->leases_released = s->n_released;
  out->leases_revoked = s->n_revoked;
  out->origin_refetch = s->n_refetch;
  out->chunks_suspect = s->suspect_count;
  out->leases_suspect = s->n_suspect;
  out->members_unconfirmed = s->uncounted;
  out->claims_distrusted = s->n_distrusted;
  out->claims_confirmed = s->n_confirms;
  out->created_ms = s->created_ms;
}

void trk_swarm_member_info(const trk_swarm_t *s, uint32_t i,
                           trk_member_info_t *out) {
  const trk_member_t *m = s->members[i];
  out->peer = m->peer;
  out->role = m->role;
  out->have_count = m->have_count;
  out->nleases = m->nleases;
  out->joined_ms = m->joined_ms;
  out->origin_chunks = m->origin_chunks;
  out->counted = m->counted;
  out->confirmed_ms = m->confirmed_ms;
}

uint32_t trk_swarm_avail(const trk_swarm_t *s, uint32_t chunk) {
  return chunk < s->total ? s->avail[chunk] : 0;
}

const trk_member_t *trk_swarm_lease_holder(const trk_swarm_t *s,
                                           uint32_t chunk) {
  return chunk < s->total ? s->holder[chunk] : NULL;
}

int trk_member_has(const trk_member_t *m, uint32_t chunk) {
  return trk_bits_get(m->have, chunk);
}

uint32_t trk_member_have_count(const trk_member_t *m) {
  return m->have_count;
}

trk_peer_t *trk_member_peer(const trk_member_t *m) {
  return m->peer;
}

trk_role_t trk_member_role(const trk_member_t *m) {
  return m->role;
}

uint32_t trk_member_want(const trk_member_t *m) {
  return m->want_leases;
}

void trk_member_set_want(trk_member_t *m, uint32_t want) {
  m->want_leases = want;
}

void trk_swarm_set_joining(trk_swarm_t *s, uint32_t n) {
  s->joining = n;
}

void trk_swarm_set_max_members(trk_swarm_t *s, uint32_t n) {
  s->max_members = n != 0 && n <= TRK_MAX_MEMBERS_MAX ? n : TRK_MAX_MEMBERS;
}

uint32_t trk_swarm_max_members(const trk_swarm_t *s) {
  return s->max_members;
}

void trk_swarm_set_origin_target(trk_swarm_t *s, uint32_t n) {
  s->origin_target = n;
}
