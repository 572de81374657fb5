// The websocket channel (https://hl7.org/fhir/R4/subscription.html#2.46.7.2): a client connected to
// GET /fhir/$subscription-websocket with its token sends `bind <id>` for a websocket Subscription its
// account owns, is answered `bound <id>`, and then gets `ping <id>` for each notification the dispatcher
// queued for it (in whichever process), read here from the queue after the last one this process saw.
// Bounded: sockets per process, bindings per socket, the text a client may send, and what may wait
// unsent on a socket (a client that does not read is dropped). A connection lasts no longer than the
// token it was opened with: at its expiry the server closes it (code 1008), as it would refuse a request.
import type { Principal } from '../auth/principal.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { subscriptionsWhere } from './subscriptions.js';

/** What the hub needs of a socket (the `ws` package's WebSocket). */
export interface HubSocket {
  readonly bufferedAmount: number;
  send(text: string): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  ping(): void;
  on(event: 'message', listener: (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => void): this;
  on(event: 'close' | 'pong', listener: () => void): this;
}

const MAX_SOCKETS = 1000;
/** One account cannot take every socket of a process. */
const MAX_SOCKETS_PER_ACCOUNT = 50;
const MAX_BINDINGS_PER_SOCKET = 20;
/** Unsent bytes a socket may hold before its client counts as gone. */
const MAX_BUFFERED_BYTES = 1024 * 1024;
const MAX_MESSAGE_CHARS = 200;
/** Pings per poll at most: a burst beyond it is sent over the next polls. */
const POLL_ROWS = 1000;
const BIND = /^bind ([A-Za-z0-9\-.]{1,64})$/;
/** setTimeout's longest delay; a token lives far shorter, this only keeps the timer valid. */
const MAX_TIMER_MS = 2 ** 31 - 1;

interface Binding {
  readonly id: string;
  readonly sockets: Set<HubSocket>;
}

interface SocketState {
  readonly principal: Principal;
  readonly bound: Set<number>;
  /** Answered the last protocol ping. */
  alive: boolean;
  /** Closes the socket when its token expires. */
  expiry?: NodeJS.Timeout;
}

export class WebsocketHub {
  private readonly bindings = new Map<number, Binding>();
  private readonly sockets = new Map<HubSocket, SocketState>();
  /** The last queued notification this process looked at; undefined while nothing is bound. */
  private cursor: number | undefined;

  constructor(private readonly db: SqlDatabase) {}

  attach(socket: HubSocket, principal: Principal): void {
    if (this.sockets.size >= MAX_SOCKETS) {
      socket.close(1013, 'too many websocket connections on this server process');
      return;
    }
    const ofAccount = [...this.sockets.values()].filter((s) => s.principal.accountId === principal.accountId).length;
    if (ofAccount >= MAX_SOCKETS_PER_ACCOUNT) {
      socket.close(1013, `at most ${MAX_SOCKETS_PER_ACCOUNT} websocket connections per account on this server process`);
      return;
    }
    const state: SocketState = { principal, bound: new Set<number>(), alive: true };
    this.sockets.set(socket, state);
    if (principal.expiresAt !== undefined) {
      const closeAtExpiry = () => {
        socket.close(1008, 'access token expired');
        this.detach(socket);
      };
      state.expiry = setTimeout(closeAtExpiry, Math.min(MAX_TIMER_MS, Math.max(0, principal.expiresAt - Date.now())));
      state.expiry.unref();
    }
    socket.on('pong', () => {
      state.alive = true;
    });
    socket.on('close', () => this.detach(socket));
    socket.on('message', (data, isBinary) => {
      const text = isBinary ? '' : data.toString();
      const match = text.length <= MAX_MESSAGE_CHARS ? BIND.exec(text.trim()) : null;
      if (!match) {
        this.send(socket, 'error expected "bind <subscription id>"');
        return;
      }
      this.bind(socket, match[1]).catch(() => this.send(socket, `error ${match[1]} could not be bound`));
    });
  }

  /** Sends each socket a protocol ping; one that did not answer the last one is dropped. */
  heartbeat(): void {
    for (const [socket, state] of this.sockets) {
      if (!state.alive) {
        socket.terminate();
        this.detach(socket);
        continue;
      }
      state.alive = false;
      socket.ping();
    }
  }

  /** Sends `ping <id>` for the notifications queued since the last poll to the sockets bound to them. */
  async poll(): Promise<void> {
    if (this.bindings.size === 0 || this.cursor === undefined) return;
    const pks = [...this.bindings.keys()];
    const rows = await this.db.query<{ seq: number | string; subscription_pk: number | string }>(
      `SELECT seq, subscription_pk FROM subscription_notification WHERE seq > ? AND subscription_pk IN (${pks.map(() => '?').join(', ')}) ORDER BY seq LIMIT ?`,
      [this.cursor, ...pks, POLL_ROWS],
    );
    for (const row of rows) {
      this.cursor = Math.max(this.cursor ?? 0, Number(row.seq));
      const binding = this.bindings.get(Number(row.subscription_pk));
      if (binding) for (const socket of binding.sockets) this.send(socket, `ping ${binding.id}`);
    }
  }

  closeAll(): void {
    for (const [socket, state] of this.sockets) {
      clearTimeout(state.expiry);
      socket.close(1001, 'server shutting down');
    }
    this.sockets.clear();
    this.bindings.clear();
  }

  private async bind(socket: HubSocket, id: string): Promise<void> {
    const state = this.sockets.get(socket);
    if (!state) return;
    const [subscription] = await subscriptionsWhere(this.db, 'id = ?', [id]);
    // Another account's subscription is answered as one that does not exist.
    if (!subscription || subscription.accountId !== state.principal.accountId) {
      this.send(socket, `error ${id} is not a Subscription of this account`);
      return;
    }
    if (subscription.channelType !== 'websocket') {
      this.send(socket, `error ${id} is not a websocket Subscription (channel.type ${subscription.channelType})`);
      return;
    }
    if (!state.bound.has(subscription.pk) && state.bound.size >= MAX_BINDINGS_PER_SOCKET) {
      this.send(socket, `error at most ${MAX_BINDINGS_PER_SOCKET} subscriptions per connection`);
      return;
    }
    if (this.cursor === undefined) {
      const [row] = await this.db.query<{ seq: number | string | null }>(
        'SELECT MAX(seq) AS seq FROM subscription_notification',
      );
      this.cursor = Number(row?.seq ?? 0);
    }
    if (!this.sockets.has(socket)) return;
    state.bound.add(subscription.pk);
    let binding = this.bindings.get(subscription.pk);
    if (!binding) this.bindings.set(subscription.pk, (binding = { id: subscription.id, sockets: new Set() }));
    binding.sockets.add(socket);
    this.send(socket, `bound ${subscription.id}`);
  }

  private send(socket: HubSocket, text: string): void {
    if (socket.bufferedAmount > MAX_BUFFERED_BYTES) {
      socket.terminate();
      this.detach(socket);
      return;
    }
    socket.send(text);
  }

  private detach(socket: HubSocket): void {
    const state = this.sockets.get(socket);
    if (!state) return;
    this.sockets.delete(socket);
    clearTimeout(state.expiry);
    for (const pk of state.bound) {
      const binding = this.bindings.get(pk);
      binding?.sockets.delete(socket);
      if (binding?.sockets.size === 0) this.bindings.delete(pk);
    }
    if (this.bindings.size === 0) this.cursor = undefined;
  }
}
