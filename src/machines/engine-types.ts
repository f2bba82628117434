/**
 * The engine chart's contract (engine.ts): its input and the config's defaults, the requests
 * and events it takes, the results and announcements it emits, and its context.
 */
import type { AnyActorRef } from 'xstate';
import type { ManualOutput } from './manual';
import type { OverflowOutput } from './overflow';
import type { PressureOutput } from './pressure-types';
import type { RoutePolicy } from '../services/context';
import type { ChartNotification, ErrorInfo, NotifyEvent } from './types';

/** `auto`, `maxAttempts`, `maxOverflowRetries`: the policy used where no route policy is looked up. */
export type { RoutePolicy };
export interface EngineInput extends RoutePolicy {
  /** Background compaction (SPEC §13) on for some route: the engine keeps a background chart. */
  background?: boolean;
  pruneEnabled: boolean;
  failureLimit: number;
  cooldownMs: number;
}

export type EngineRequest =
  | { type: 'step.completed'; id: string; turn: number | null; aborted: boolean }
  /**
   * `overflow`: the error reads as a context overflow (the host's classification, `classifyRequestError`);
   * false: the job does not wait for a background summary only to decline. Absent: it may be one.
   */
  | { type: 'request.failed'; id: string; error: unknown; turn: number | null; aborted: boolean; lastAssistantSeq: number; overflow?: boolean }
  | { type: 'compact.requested'; id: string; aborted: boolean; abortReason: string | undefined; focus: string | undefined }
  /** `reason`: the caller's, kept in the error and in `compaction/end.error`. */
  | { type: 'cancel'; id: string; reason?: string };

/** A graceful shutdown (see the header). */
export type ShutdownEvent = { type: 'shutdown' };

type InternalEvent = { type: 'breaker.failure' } | { type: 'breaker.success' } | NotifyEvent;
export type EngineEvent = EngineRequest | ShutdownEvent | InternalEvent;

export type SettledResult =
  | { kind: 'pressure'; output: PressureOutput }
  | { kind: 'overflow'; output: OverflowOutput }
  | { kind: 'manual'; output: ManualOutput }
  | { kind: 'busy'; running: 'pressure' | 'overflow' | 'manual' }
  | { kind: 'auto-off' }
  | { kind: 'paused'; consecutiveFailures: number }
  /** A chart itself failed (a bug, not a service failure): the engine stays usable. */
  | { kind: 'error'; error: ErrorInfo };

/** The answer to a request (its id) and the engine's own announcements. */
export type EngineEmitted =
  | { type: 'request.settled'; id: string; result: SettledResult }
  | { type: 'breaker.opened'; consecutiveFailures: number; cooldownMs: number }
  | { type: 'breaker.closed'; why: 'success' | 'cooldown' }
  | { type: 'capacity.missing'; provider: string; model: string; message: string };

/** Everything the engine chart emits (and sends to its parent). */
export type CompactionEmitted = EngineEmitted | ChartNotification;

/** The config's defaults, for the chart run on its own; `createCompactionMachine` bakes the parsed config's. */
export const DEFAULT_ENGINE_INPUT: EngineInput = {
  auto: true,
  pruneEnabled: true,
  maxAttempts: 2,
  maxOverflowRetries: 1,
  failureLimit: 3,
  cooldownMs: 300_000,
};

/** The chart's starting context for an input. */
export function engineContext(input: EngineInput): EngineContext {
  return {
    ...input,
    policy: { auto: input.auto, maxAttempts: input.maxAttempts, maxOverflowRetries: input.maxOverflowRetries },
    silentSeenSeq: -1,
    current: undefined,
    pending: undefined,
    consecutiveFailures: 0,
    overflowRetries: 0,
    retryAnchorSeq: -1,
    warnedModels: [],
    backgroundRef: undefined,
  };
}

export interface EngineContext extends EngineInput {
  /** The routed model's policy, looked up when a job starts. */
  policy: RoutePolicy;
  /** The newest usage seq a silent overflow was reported for. */
  silentSeenSeq: number;
  current: { id: string; kind: 'pressure' | 'overflow' | 'manual' } | undefined;
  pending: EngineRequest | undefined;
  consecutiveFailures: number;
  overflowRetries: number;
  /** Seq of the latest assistant message when the last overflow retry was granted. */
  retryAnchorSeq: number;
  warnedModels: string[];
  /** The background chart (SPEC §13), when `background` is on: the quick check reads whether it is idle. */
  backgroundRef: AnyActorRef | undefined;
}
