/**
 * The routed model's figures: its budget (docs/spec.md#3-configuration), the policy the charts apply to it, and the
 * model a summary is written by. The route is the latest `request/header`.
 */
import { XcompactError } from '../../errors';
import { CompactionError } from './compaction-error';
import { modelInfoFor, policyFor, resolveBudget, type ResolvedBudget } from '../config';
import type { ServiceDeps } from './deps';
// The chart declares what it reads of a policy (one declaration); routePolicy fills it in.

/** What the charts take from the routed model's policy (per-model fields of docs/spec.md#3-configuration). */
export interface RoutePolicy {
  auto: boolean;
  /** 1 + compactionRetries. */
  maxAttempts: number;
  maxOverflowRetries: number;
}

/** Throws `unrouted` before the first request, a BudgetError when the budget cannot be resolved. */
export function routeBudget({ session, config }: Pick<ServiceDeps, 'session' | 'config'>): ResolvedBudget {
  const header = session.latestHeader;
  if (!header) throw new XcompactError('unrouted', 'no request has been recorded yet (no request/header)');
  const { provider, model, maxTokens } = header.data;
  const info = modelInfoFor(config, provider, model);
  return resolveBudget({
    config,
    provider,
    model,
    contextWindow: info?.contextWindow,
    ...(maxTokens !== undefined ? { requestMaxTokens: maxTokens } : {}),
    ...(info?.maxOutputTokens !== undefined ? { modelMaxOutputTokens: info.maxOutputTokens } : {}),
  });
}

/** The route's merged policy (a modelPolicies entry over the top level); the top level before any request. */
export function routePolicy({ session, config }: Pick<ServiceDeps, 'session' | 'config'>): RoutePolicy {
  const header = session.latestHeader;
  const p = header ? policyFor(config, header.data.provider, header.data.model) : config;
  return { auto: p.auto, maxAttempts: 1 + p.compactionRetries, maxOverflowRetries: p.maxOverflowRetries };
}

/**
 * Recall is on for the route (docs/recall.md): checkpoints and pruned-result markers name their recall
 * handles. The top level before any request.
 */
export function recallOn({ session, config }: Pick<ServiceDeps, 'session' | 'config'>): boolean {
  const header = session.latestHeader;
  return header ? policyFor(config, header.data.provider, header.data.model).recall : config.recall;
}

/** The model that writes summaries: the configured one, else the routed model. */
export function summaryTarget({ session, config }: Pick<ServiceDeps, 'session' | 'config'>): { provider: string; model: string } {
  if (config.summarizationProvider && config.summarizationModel) {
    return { provider: config.summarizationProvider, model: config.summarizationModel };
  }
  const header = session.latestHeader;
  if (!header) {
    throw new CompactionError({
      code: 'summary',
      message: 'no summarization model: set summarizationProvider and summarizationModel, or record a request first',
    });
  }
  return { provider: header.data.provider, model: header.data.model };
}
