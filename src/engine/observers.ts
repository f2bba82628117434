/**
 * Observers of every engine this process creates: the hook `xcompact/testing`'s loop checker
 * (checkLoop) uses to watch an engine that a user's loop builds itself. No observer is
 * registered otherwise, and creating an engine then costs one lookup.
 *
 * The registry lives on `globalThis` under a registered symbol, not in a module variable: the
 * package's entry points are separate bundles (dist/index.js, dist/testing.js, their CJS twins),
 * and an engine created through one must reach a checker loaded through another.
 */
/**
 * Typed loosely on purpose: this module sits below src/engine/facade.ts (which calls announceEngine), so
 * it cannot name the engine's types without an import cycle. The observer in xcompact/testing
 * knows them: it is handed a `CompactionEngine` and its `CompactionEngineOptions`.
 */
export type EngineObserver = (engine: object, options: object) => void;

const KEY = Symbol.for('xcompact.engine-observers');

function registry(): Set<EngineObserver> {
  const g = globalThis as { [KEY]?: Set<EngineObserver> };
  return (g[KEY] ??= new Set());
}

/** Calls `observer` with every engine created from now on, until the returned function is called. */
export function observeEngines(observer: EngineObserver): () => void {
  registry().add(observer);
  return () => registry().delete(observer);
}

/** Called by createCompactionEngine with the engine it built. An observer that throws is reported, not rethrown. */
export function announceEngine(engine: object, options: object): void {
  const observers = (globalThis as { [KEY]?: Set<EngineObserver> })[KEY];
  if (!observers || observers.size === 0) return;
  for (const observer of [...observers]) {
    try {
      observer(engine, options);
    } catch (err) {
      console.error('xcompact: an engine observer threw', err);
    }
  }
}
