/**
 * A TCP proxy between the PostgreSQL client and server that reads the wire protocol's messages
 * (a type byte and a length) and stops a flush at a chosen point: before its statement reaches
 * the server, inside a message, between the extended-protocol messages (Parse, Bind, Describe,
 * Execute, Sync), or on the way back (before any reply, after ParseComplete, after
 * CommandComplete, after the whole reply). At the point it freezes every connection (nothing
 * more is forwarded either way) and says so; the test then kills the server and drops the
 * connections, so what the server did and what the client heard are exactly the point's.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type KillPoint =
  | { at: 'client'; before: 'P' | 'B' | 'E' | 'S'; partial?: boolean; settleMs?: number }
  | { at: 'server'; forwardThrough?: '1' | '2' | 'C' | 'Z'; freezeOnly?: boolean };

interface Armed {
  point: KillPoint;
  reached: () => void;
  /** The connection the statement went out on. */
  conn?: Conn;
}

interface Conn {
  client: Socket;
  upstream: Socket;
  started: boolean;
  toServer: Buffer;
  toClient: Buffer;
}

/** Splits whole messages off the front of `buf` (the startup message has no type byte). */
function messages(buf: Buffer, typed: boolean): { list: Buffer[]; rest: Buffer } {
  const list: Buffer[] = [];
  let at = 0;
  for (;;) {
    const head = typed ? 5 : 4;
    if (buf.length - at < head) break;
    const len = typed ? buf.readInt32BE(at + 1) + 1 : buf.readInt32BE(at);
    if (buf.length - at < len) break;
    list.push(buf.subarray(at, at + len));
    at += len;
  }
  return { list, rest: buf.subarray(at) };
}

export interface PgProxy {
  url: string;
  /** Stops the next statement holding `marker` (in its Parse message) at `point`; resolves once it is there. */
  arm(marker: string, point: KillPoint): Promise<void>;
  /** Destroys every connection (the client sees them break). */
  dropAll(): void;
  /** Forwards again (new connections after a restart). */
  disarm(): void;
  close(): Promise<void>;
}

export async function startPgProxy(target: string): Promise<PgProxy> {
  const t = new URL(target);
  const conns = new Set<Conn>();
  let frozen = false;
  let armed: (Armed & { marker: string }) | undefined;

  const fromClient = (c: Conn, data: Buffer) => {
    if (frozen) return;
    c.toServer = Buffer.concat([c.toServer, data]);
    const { list, rest } = messages(c.toServer, c.started);
    c.toServer = rest;
    for (const m of list) {
      if (frozen) return;
      if (!c.started) {
        c.started = m.length !== 8; // an SSLRequest (8 bytes) comes before the startup message
        c.upstream.write(m);
        continue;
      }
      const type = String.fromCharCode(m[0]!);
      if (armed && !armed.conn && type === 'P' && m.includes(armed.marker)) armed.conn = c;
      const p = armed?.point;
      if (armed && armed.conn === c && p?.at === 'client' && type === p.before) {
        if (p.partial) c.upstream.write(m.subarray(0, Math.floor(m.length / 2)));
        frozen = true;
        const done = armed.reached;
        setTimeout(done, p.settleMs ?? 50);
        return;
      }
      c.upstream.write(m);
    }
  };

  const fromServer = (c: Conn, data: Buffer) => {
    if (frozen) return;
    const p = armed?.point;
    if (!armed || armed.conn !== c || p?.at !== 'server') {
      c.client.write(data);
      return;
    }
    c.toClient = Buffer.concat([c.toClient, data]);
    const { list, rest } = messages(c.toClient, true);
    c.toClient = rest;
    let forwarding = p.forwardThrough !== undefined;
    for (const m of list) {
      const type = String.fromCharCode(m[0]!);
      if (forwarding) c.client.write(m);
      if (type === p.forwardThrough) forwarding = false;
      // ReadyForQuery: the statement is over on the server (committed or not).
      if (type === 'Z') {
        frozen = true;
        armed.reached();
        return;
      }
    }
  };

  const server: Server = createServer((client) => {
    const upstream = connect(Number(t.port), t.hostname);
    const c: Conn = { client, upstream, started: false, toServer: Buffer.alloc(0), toClient: Buffer.alloc(0) };
    conns.add(c);
    client.on('data', (d: Buffer) => fromClient(c, d));
    upstream.on('data', (d: Buffer) => fromServer(c, d));
    const end = () => {
      conns.delete(c);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', () => (frozen ? undefined : end()));
    upstream.on('close', () => (frozen ? undefined : end()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const dropAll = () => {
    for (const c of conns) {
      c.client.destroy();
      c.upstream.destroy();
    }
    conns.clear();
  };
  const url = new URL(target);
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    arm(marker, point) {
      return new Promise<void>((reached) => {
        armed = { marker, point, reached };
      });
    },
    dropAll,
    disarm() {
      armed = undefined;
      frozen = false;
    },
    async close() {
      dropAll();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
