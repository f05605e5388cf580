/*
 * Oncehook's run protocol, as a model for the Spin model checker (Promela).
 *
 * What it is: the claim, dispatch, lease, fence, renewal, recorded steps (one external, one
 * local), takeover, retry, give-up (failed) and redrive of ONE event delivered DELIVERIES
 * times, run by WORKERS workers, with the reconciler, a clock that lets a lease expire at any
 * moment, worker crashes (kill -9) at any point, handler errors and a lost queue. Each action
 * is one atomic step of the model and names, in its comment and its printf, the SQL statement
 * it stands for (packages/core/src/store/sql/runs.ts, recovery.ts, claim.ts, operators.ts).
 *
 * The database as modelled: a statement is atomic (autocommit), except a step's transaction,
 * which holds the run row's lock from its fence (LOCK_LEASED_RUN, FOR NO KEY UPDATE) to its
 * COMMIT. An UPDATE of a row another transaction holds waits, then re-checks its WHERE on the
 * newest committed version (READ COMMITTED). A statement's snapshot is taken when it starts:
 * an UPDATE that waited reads OTHER rows as they were before it waited (see SNAPSHOT_STEPS).
 *
 * Invariants (assertions; `npm run model` checks them, test/protocol-model.test.ts at a small
 * bound):
 *   1. no committed local step applied twice (its domain write counted at COMMIT);
 *   2. no external step called twice with different keys (every call sends the first call's
 *      key), and none called again once its record is committed (a downstream forgets keys,
 *      Stripe's after 24 hours: a repeat after the record is a second charge waiting);
 *   3. no acknowledged event lost: when nothing can move any more, an event answered 202 is
 *      done or failed (a dead letter an operator sees and can redrive), never stuck or absent;
 *   4. no run done with a step missing: at MARK_RUN_DONE every step is recorded AND its
 *      effect happened.
 *
 * Not modelled: pauses and flow limits, replays (a deliberate new generation: new keys by
 * design), the `final` step (its record and the done are one statement), per-object
 * ordering, retention, several handlers and events (they share no run rows).
 *
 * Mutants (spin -D<NAME>); each yields a counterexample (test/protocol-model.test.ts):
 *   NO_FENCE           LOCK_LEASED_RUN, MARK_RUN_DONE and the other transitions without
 *                      `lease_token = $2`: a worker whose lease was taken over still commits
 *   SNAPSHOT_STEPS     the takeover reads the recorded steps in its lease statement's snapshot
 *                      (the bug the race audit found; the acquire-steps-in-returning mutant)
 *   NO_RENEW_AT_STEP   an external call made without RENEW_LEASE_AT_STEP proving the lease
 *   KEY_PER_ATTEMPT    the outbound key derived from the lease (a fresh uuid per attempt)
 *                      instead of (event, handler, step, generation)
 *   LOCAL_OUTSIDE_TX   the local step's domain write committed on its own, not in the
 *                      step's fenced transaction with its record
 *   RECORD_BEFORE_CALL an external step recorded before its call returned
 *   NO_RECONCILER      nothing finds a lost job again
 * Not a mutant: NO_STEP_KEY (RECORD_STEP without its primary key) holds every invariant: under
 * the fence the key is never needed; it is a second guard (docs/reliability.md).
 */

#ifndef WORKERS
#define WORKERS 2
#endif
#ifndef DELIVERIES
#define DELIVERIES 2
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef QUEUE_LOSSES
#define QUEUE_LOSSES 1
#endif
#ifndef ERRORS
#define ERRORS 1
#endif
#ifndef REDRIVES
#define REDRIVES 1
#endif
#ifndef EXPIRIES
#define EXPIRIES 2
#endif
#ifndef MAX_ATTEMPTS
#define MAX_ATTEMPTS 3
#endif

/* events.state and handler_runs.state */
#define ABSENT 0
#define RECEIVED 1
#define PROCESSING 2
#define DONE 3
#define FAILED 4

/* The handler's steps, in its order: an external call (a charge), then a local write (the ledger). */
#define EXT 0
#define LOC 1
/* handler_runs.generation: only a replay (not modelled) changes it. */
#define GENERATION 1

/* ---- the database -------------------------------------------------------------------------- */
byte evState = ABSENT;  /* events.state */
byte runState = ABSENT; /* handler_runs.state */
byte token = 0;         /* handler_runs.lease_token; 0 = NULL */
bool expired = false;   /* handler_runs.lease_until < now() */
byte attempts = 0;      /* handler_runs.attempts */
byte rowLock = 0;       /* the worker whose step transaction holds the run row; 0 = none */
bool recorded[2];       /* committed handler_steps rows (run, generation, name) */
byte pending[2];        /* an uncommitted handler_steps row: the worker whose transaction wrote it */
byte leases = 0;        /* lease tokens handed out so far (each lease: a fresh uuid) */
byte holder = 0;        /* the worker process the current lease was given to; 0 = it died */

/* ---- the world outside ---------------------------------------------------------------------- */
bool acked = false;       /* a delivery was answered 202 */
bool dispatchJob = false; /* the event's dispatch job in BullMQ (its id from the event key: one at most) */
bool runJob = false;      /* the run's job */
byte effects[2];          /* local: committed domain writes; external: effects the downstream applied */
byte firstKey = 0;        /* the outbound key of the first external call; 0 = none yet */

/* ---- fault budgets -------------------------------------------------------------------------- */
byte crashesLeft = CRASHES;
byte crashing = 0; /* the worker being killed (kill -9) now; 0 = none */
byte lossesLeft = QUEUE_LOSSES;
byte expiriesLeft = EXPIRIES;
byte errorsLeft = ERRORS;
byte redrivesLeft = REDRIVES;

/* An UPDATE of the run row waits while another transaction holds it. */
#define rowFree(me) (rowLock == 0 || rowLock == me)

#ifdef NO_FENCE
#define holds(tok) (runState == PROCESSING)
#else
#define holds(tok) (token == tok && runState == PROCESSING)
#endif

/* A transaction ends without COMMIT (ROLLBACK, or its connection died): its lock and rows go. */
inline rollback(me) {
  if
  :: rowLock == me -> rowLock = 0
  :: else -> skip
  fi;
  if
  :: pending[EXT] == me -> pending[EXT] = 0
  :: else -> skip
  fi;
  if
  :: pending[LOC] == me -> pending[LOC] = 0
  :: else -> skip
  fi;
  localWritten = false
}

/* LOCK_LEASED_RUN, the first statement of a step's transaction: waits for the row, proves the lease. */
inline fence(me, tok) {
  atomic {
    rowFree(me) ->
    if
    :: holds(tok) -> rowLock = me; printf("W%d LOCK_LEASED_RUN token=%d: the fence holds\n", me, tok)
    :: else -> printf("W%d LOCK_LEASED_RUN token=%d: 0 rows, the lease is lost\n", me, tok); goto lost
    fi
  }
}

/* RECORD_STEP: the primary key (run, generation, name) makes a second row wait for the first, then fail. */
inline record(me, s) {
  atomic {
#ifdef NO_STEP_KEY
    pending[s] = me; printf("W%d RECORD_STEP %d (uncommitted; no primary key)\n", me, s)
#else
    (pending[s] == 0 || pending[s] == me) ->
    if
    :: recorded[s] -> printf("W%d RECORD_STEP %d: unique violation, the transaction rolls back\n", me, s); goto error
    :: else -> pending[s] = me; printf("W%d RECORD_STEP %d (uncommitted)\n", me, s)
    fi
#endif
  }
}

/* COMMIT of the step's transaction: its record and its domain write become visible together. */
inline commit(me, s) {
  atomic {
    recorded[s] = true;
    pending[s] = 0;
    rowLock = 0;
    if
    :: localWritten -> effects[LOC]++; localWritten = false; assert(effects[LOC] <= 1) /* invariant 1 */
    :: else -> skip
    fi;
    printf("W%d COMMIT step %d\n", me, s)
  }
}

#ifdef KEY_PER_ATTEMPT
#define KEY(tok) (tok)
#else
#define KEY(tok) GENERATION /* idempotencyKeyFor(source, event id, handler, step, generation) */
#endif

/* The call to the downstream API with the step's idempotency key; the downstream applies a key once. */
inline callExternal(me, tok) {
  printf("W%d calls the external API with key %d\n", me, KEY(tok));
  assert(firstKey == 0 || !recorded[EXT]); /* invariant 2: never called AGAIN once its record is committed */
  if
  :: firstKey == 0 -> firstKey = KEY(tok); effects[EXT]++
  :: else -> assert(KEY(tok) == firstKey) /* invariant 2: one key, so the downstream applies nothing new */
  fi
}

/* A handler error (retryable) at this point, within the budget. */
inline maybeFail(me) {
  if
  :: atomic { errorsLeft > 0 -> errorsLeft--; printf("W%d the handler throws\n", me) }; goto error
  :: skip
  fi
}

/* ---- ingest: one delivery -------------------------------------------------------------------- */
proctype Delivery() {
  /* One step: a crash of ingest between its commit and its enqueue is the lost enqueue. */
  atomic {
    /* CLAIM_EVENT: INSERT ... ON CONFLICT DO NOTHING, committed before anything else */
    if
    :: evState == ABSENT ->
       evState = RECEIVED; printf("ingest CLAIM_EVENT: inserted\n");
       if
       :: dispatchJob = true; printf("ingest enqueues the dispatch job\n")
       :: printf("ingest: the enqueue is lost (Redis failed after the commit)\n")
       fi
    :: else -> printf("ingest CLAIM_EVENT: a duplicate, nothing written\n")
    fi;
    acked = true; /* 202, after the commit */
    printf("ingest answers 202\n")
  }
}

/* ---- a worker: takes a job and runs it; `crashing == me` kills it at any point ------------------ */
proctype Worker(byte me) {
  byte tok;          /* our lease token; 0 = none */
  byte attempt;      /* the attempt our lease counted */
  bool seen[2];      /* the recorded steps as we read them after the lease */
#ifdef SNAPSHOT_STEPS
  bool snap[2];      /* the lease statement's snapshot of handler_steps */
#endif
  bool localWritten; /* our step transaction's uncommitted domain write */
  bool isDispatch;
  bool released;

end_idle:
  if
  :: atomic { dispatchJob -> dispatchJob = false; isDispatch = true; printf("W%d takes the dispatch job\n", me) }
  :: atomic { runJob -> runJob = false; isDispatch = false; printf("W%d takes the run job\n", me) }
  fi;
  {
    if
    :: isDispatch ->
       /* DISPATCH_AND_LEASE: received -> processing, the run created already leased to us */
       atomic {
         if
         :: evState == RECEIVED ->
            evState = PROCESSING; runState = PROCESSING; leases++; tok = leases; token = tok; holder = me;
            expired = false; attempts = 1; attempt = 1;
            printf("W%d DISPATCH_AND_LEASE: the run created, leased with token %d\n", me, tok)
         :: else -> printf("W%d DISPATCH_AND_LEASE: 0 rows (dispatched already)\n", me)
         fi
       }
    :: else -> skip
    fi;
    if
    :: tok == 0 ->
#ifdef SNAPSHOT_STEPS
       /* ACQUIRE_RUN starts: its snapshot */
       atomic {
         snap[EXT] = recorded[EXT]; snap[LOC] = recorded[LOC];
         printf("W%d ACQUIRE_RUN starts: its snapshot has external %d, local %d\n", me, snap[EXT], snap[LOC])
       };
#endif
       /* ACQUIRE_RUN (a repeated dispatch: ACQUIRE_CLAIMABLE_RUNS, the same guard): waits for the
          row, re-checks the guard on its newest version, takes the lease with a fresh token */
       atomic {
         rowFree(me) ->
         if
         :: runState == RECEIVED || (runState == PROCESSING && expired) ->
            runState = PROCESSING; leases++; tok = leases; token = tok; holder = me; expired = false;
            attempts++; attempt = attempts;
#ifndef SNAPSHOT_STEPS
            /* its RETURNING's leased_steps (migration 0021): a VOLATILE function, so a snapshot
               taken after the row lock was granted: every step committed before this lease */
            seen[EXT] = recorded[EXT]; seen[LOC] = recorded[LOC];
#endif
            printf("W%d ACQUIRE_RUN: leased with token %d, attempt %d, its steps: external %d, local %d\n", me, tok, attempt, seen[EXT], seen[LOC])
         :: else -> printf("W%d ACQUIRE_RUN: 0 rows, not ours to run\n", me); goto finished
         fi
       };
#ifdef SNAPSHOT_STEPS
       seen[EXT] = snap[EXT]; seen[LOC] = snap[LOC];
       printf("W%d reads the steps from the lease statement's snapshot: external %d, local %d\n", me, seen[EXT], seen[LOC]);
#endif
       if
       :: attempt > MAX_ATTEMPTS -> goto giveUp
       :: else -> skip
       fi
    :: else -> skip
    fi;

    /* the handler's first step: external */
    if
    :: !seen[EXT] ->
#ifdef RECORD_BEFORE_CALL
       fence(me, tok); record(me, EXT); commit(me, EXT);
       atomic { callExternal(me, tok) };
#else
       /* RENEW_LEASE_AT_STEP: proves the lease, by a read while the lease has half of it left
          (not expired here: the model has no durations) or by a renewal that gives the call all
          of it; the call leaves at once, within that lease (the model's one timing assumption:
          a worker frozen for a whole lease between the two would call late, with the same key) */
       atomic {
#ifndef NO_RENEW_AT_STEP
         rowFree(me) ->
         if
         :: token == tok && runState == PROCESSING && !expired -> printf("W%d RENEW_LEASE_AT_STEP: read, the lease fresh\n", me)
         :: token == tok && runState == PROCESSING -> expired = false; printf("W%d RENEW_LEASE_AT_STEP: renewed\n", me)
         :: else -> printf("W%d RENEW_LEASE_AT_STEP: 0 rows, the lease is lost\n", me); goto lost
         fi;
#endif
         callExternal(me, tok)
       };
       /* RECORD_EXTERNAL_STEP: the code sends the fence, the record and its commit as ONE
          autocommit statement; the model keeps them three steps, which allows every
          interleaving the one statement allows and more, so what holds here holds there */
       fence(me, tok); record(me, EXT); commit(me, EXT);
#endif
    :: else -> skip
    fi;
    maybeFail(me);

    /* the handler's second step: local */
    if
    :: !seen[LOC] ->
#ifdef LOCAL_OUTSIDE_TX
       atomic { effects[LOC]++; assert(effects[LOC] <= 1); printf("W%d writes the ledger on its own\n", me) };
       fence(me, tok); record(me, LOC); commit(me, LOC);
#else
       fence(me, tok);
       localWritten = true; /* the handler's domain write, in the step's transaction */
       record(me, LOC); commit(me, LOC);
#endif
    :: else -> skip
    fi;
    maybeFail(me);

    /* MARK_RUN_DONE: processing -> done, fenced, with the event's state in the same statement */
    atomic {
      rowFree(me) ->
      if
      :: holds(tok) ->
         assert(recorded[EXT] && recorded[LOC] && effects[EXT] == 1 && effects[LOC] == 1); /* invariant 4 */
         runState = DONE; token = 0; evState = DONE;
         printf("W%d MARK_RUN_DONE: the run and the event are done\n", me)
      :: else -> printf("W%d MARK_RUN_DONE: 0 rows, the lease is lost\n", me)
      fi
    };
    goto finished;

error: /* a retryable error: our transaction (if any) rolled back */
    rollback(me);
    if
    :: attempt >= MAX_ATTEMPTS -> goto giveUp
    :: else -> skip
    fi;
    /* RELEASE_RUN_FOR_RETRY, fenced; then the next attempt's job */
    atomic {
      rowFree(me) ->
      if
      :: holds(tok) -> runState = RECEIVED; token = 0; released = true; printf("W%d RELEASE_RUN_FOR_RETRY\n", me)
      :: else -> printf("W%d RELEASE_RUN_FOR_RETRY: 0 rows, the lease is lost\n", me)
      fi
    };
    if
    :: released -> runJob = true; printf("W%d enqueues the retry\n", me)
    :: else -> skip
    fi;
    goto finished;

giveUp: /* MARK_RUN_FAILED, fenced: the dead letter, with the event's state */
    atomic {
      rowFree(me) ->
      if
      :: holds(tok) -> runState = FAILED; token = 0; evState = FAILED; printf("W%d MARK_RUN_FAILED\n", me)
      :: else -> printf("W%d MARK_RUN_FAILED: 0 rows, the lease is lost\n", me)
      fi
    };
    goto finished;

lost: /* the lease is not ours any more: stop, commit nothing */
    rollback(me);

finished:
    skip
  } unless {
    atomic {
      crashing == me -> crashing = 0; rollback(me);
      if
      :: holder == me -> holder = 0 /* its lease now only runs out */
      :: else -> skip
      fi;
      printf("W%d killed (kill -9): its transaction rolls back, its job is gone\n", me)
    }
  };
  tok = 0; attempt = 0; seen[EXT] = false; seen[LOC] = false;
#ifdef SNAPSHOT_STEPS
  snap[EXT] = false; snap[LOC] = false;
#endif
  localWritten = false; released = false; isDispatch = false;
  goto end_idle
}

/* ---- the clock: a lease may run out at any moment (a slow call, a GC pause, a partition) ------
   under a live worker at most EXPIRIES times, so that the model is finite (every takeover hands
   out a new token); the lease of a worker that died always runs out. */
active proctype Clock() {
end:
  do
  :: atomic { runState == PROCESSING && !expired && holder == 0 -> expired = true; printf("clock: the dead worker's lease expires\n") }
  :: atomic {
       expiriesLeft > 0 && runState == PROCESSING && !expired ->
       expiriesLeft--; expired = true; printf("clock: the lease expires\n")
     }
  od
}

#ifndef NO_RECONCILER
/* ---- the reconciler (recovery.ts), each statement at any moment (thresholds not modelled) ----- */
active proctype Reconciler() {
end:
  do
  /* STALE_EVENTS: an event claimed but not dispatched (its job lost) gets a dispatch job */
  :: atomic { evState == RECEIVED && !dispatchJob -> dispatchJob = true; printf("reconciler STALE_EVENTS: a dispatch job\n") }
  /* EXPIRED_LEASES: processing -> received, the token cleared (SKIP LOCKED: not a row a step holds) */
  :: atomic {
       runState == PROCESSING && expired && rowLock == 0 ->
       runState = RECEIVED; token = 0; runJob = true; printf("reconciler EXPIRED_LEASES: the run back to received, a job\n")
     }
  /* STALE_RUNS: a received run with no job gets one */
  :: atomic { runState == RECEIVED && !runJob -> runJob = true; printf("reconciler STALE_RUNS: a run job\n") }
  od
}
#endif

/* ---- faults: kill -9 of a worker, the queue lost (Redis restarted empty) --------------------- */
active proctype Crasher() {
end:
  do
  :: atomic { crashesLeft > 0 && crashing == 0 -> crashesLeft--; select(crashing : 1 .. WORKERS) }
  od
}

active proctype QueueLoss() {
end:
  do
  :: atomic {
       lossesLeft > 0 && (dispatchJob || runJob) ->
       lossesLeft--; dispatchJob = false; runJob = false; printf("Redis restarted empty: the jobs are gone\n")
     }
  od
}

/* ---- an operator: REDRIVE_RUNS of a failed run (attempts from 0, the same generation) -------- */
active proctype Operator() {
end:
  do
  :: atomic {
       redrivesLeft > 0 && runState == FAILED && rowLock == 0 ->
       redrivesLeft--; runState = RECEIVED; attempts = 0; evState = PROCESSING; runJob = true;
       printf("operator REDRIVE_RUNS\n")
     }
  od
}

/* ---- when nothing can move any more: every acknowledged event has an end (invariant 3) ------- */
active proctype Monitor() {
  timeout ->
  assert(!acked || evState == DONE || evState == FAILED);
  assert(evState != DONE || (runState == DONE && effects[EXT] == 1 && effects[LOC] == 1))
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < DELIVERIES -> run Delivery(); i++
    :: else -> break
    od;
    i = 1;
    do
    :: i <= WORKERS -> run Worker(i); i++
    :: else -> break
    od
  }
}
