/**
 * docs/spec.md#13-background-compaction for a background path, step by step: the answer each step or await gets from the
 * background chart, and how each run ends. The background suite (suite-background-engine.ts)
 * checks the real engine against it: what afterStep answered, what was announced, what the
 * breaker counted, what the log holds.
 */
import type { GeneratedPath } from './paths';

export interface Run {
  status: 'committed' | 'failed' | 'cancelled' | 'nothing';
  opened: boolean;
  busy: boolean;
  /** Jobs that waited for it. */
  waiters: number;
  /** Its summary was ready with no job waiting, in a run the prepare point started: held until one waited. */
  held: boolean;
  /** The run's error (`code`, and `cause`: the service's own code) when it failed or was cancelled. */
  code?: string;
  cause?: string;
}

/** The error a run ends with, by the outcome that decided it (docs/spec.md#5-the-transaction's codes, as in the foreground). */
const DECISIVE: Record<string, { code: string; cause?: string }> = {
  'selectRange:throws': { code: 'internal', cause: 'no-context-capacity' },
  'validateSpan:span-invalid': { code: 'changed', cause: 'span-invalid' },
  'validateSpan:lock-held': { code: 'busy' },
  // Another writer's compaction/start came first: busy, like a lock seen while validating.
  'openBracket:append-refused': { code: 'busy', cause: 'session-rule' },
  'summarize:fails': { code: 'summary', cause: 'summary-truncated' },
  'summarize:deadline': { code: 'summary', cause: 'summary-timeout' },
  'revalidate:span-changed': { code: 'changed' },
  'revalidate:no-shrink': { code: 'summary', cause: 'summary-no-shrink' },
  'revalidate:too-little-progress': { code: 'no-progress' },
  'revalidate:throws': { code: 'changed', cause: 'internal' },
  'commit:refused': { code: 'commit', cause: 'session-rule' },
  'flush:store-fails': { code: 'persistence', cause: 'store-interleaved' },
};

const stateOf = (value: unknown): string => (typeof value === 'string' ? value : Object.keys(value as object)[0]!);

/**
 * docs/spec.md#13-background-compaction, step by step: the reply each step or await gets, and how each run ends. A cancel is
 * honoured at once while the summary is prepared or checked, at the next decision while the
 * span is selected, validated or its bracket opened, and is too late from the commit on.
 */
export function expectedBackground(path: GeneratedPath): { replies: string[]; runs: Run[] } {
  const replies: string[] = [];
  const runs: Run[] = [];
  let run: (Run & { cancel: boolean; economic: boolean; error?: { code: string; cause?: string } }) | undefined;
  const end = (status: Run['status']) => {
    answer('background.proceed'); // a run that ended before its bracket opened: the step's job runs as usual
    const error = status === 'cancelled' ? { code: 'cancelled' } : status === 'failed' ? run!.error : undefined;
    runs.push({
      status,
      opened: run!.opened,
      busy: run!.busy,
      waiters: run!.waiters,
      held: run!.held,
      ...(error ? { code: error.code, ...(error.cause ? { cause: error.cause } : {}) } : {}),
    });
    run = undefined;
  };
  // The step that started the current run, answered once its bracket opened (or the run ended).
  let starter: number | undefined;
  const answer = (reply: string) => {
    if (starter !== undefined) replies[starter] = reply;
    starter = undefined;
  };
  for (const s of path.steps) {
    const o = s.outcome;
    const from = stateOf(s.from);
    if (o.startsWith('step:') || o === 'await') {
      if (!run) {
        if (o === 'step:prepare-point' || o === 'step:compacting-pays' || o === 'step:prepare-point-one-slot') {
          run = { status: 'failed', opened: false, busy: false, waiters: 0, held: false, cancel: false, economic: o === 'step:compacting-pays' };
          starter = replies.length;
          replies.push('background.pending');
        } else replies.push('background.proceed');
      } else if (o === 'step:threshold' || o === 'await' || (o === 'step:above-threshold' && from === 'held')) {
        run.waiters++;
        replies.push('background.waiting');
      } else replies.push('background.preparing');
      continue;
    }
    if (!run) continue; // a cancel with nothing running
    // The first failure decides the run's error (its bracket is then closed with it).
    if (DECISIVE[o] && !run.error) run.error = DECISIVE[o];
    if (o === 'cancel') {
      if (from === 'summarizing' || from === 'ready' || from === 'awaitingSlot') run.status = 'cancelled';
      else if (from === 'selecting' || from === 'validating' || from === 'opening') run.cancel = true;
      continue;
    }
    if (o === 'openBracket:append-refused') {
      // Another writer's compaction/start came first: busy, like a lock seen while validating.
      run.busy = true;
      end('failed');
    } else if (o === 'selectRange:throws' || o === 'validateSpan:span-invalid') end('failed');
    else if ((o.startsWith('selectRange:') || o.startsWith('validateSpan:')) && run.cancel) end('cancelled');
    else if (o === 'selectRange:nothing') end('nothing');
    else if (o === 'validateSpan:lock-held') {
      run.busy = true;
      end('failed');
    } else if (o === 'openBracket:opened') {
      run.opened = true;
      answer('background.preparing');
      if (run.cancel) run.status = 'cancelled';
    } else if (o === 'revalidate:good' && run.waiters === 0 && !run.economic) run.held = true;
    else if (o === 'flush:durable') end('committed');
    else if (o === 'flush:store-fails') end('failed');
    else if (o.startsWith('closeWithError:')) end(run.status === 'cancelled' ? 'cancelled' : 'failed');
  }
  return { replies, runs };
}
