// The whole root entry, loaded by the built root entry on the first use of one of its exports
// (src/lazy-entry.ts, tsup.config.ts). Not a public entry point: no `exports` key names it.
export * from './index';
