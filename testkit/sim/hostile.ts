/**
 * A hostile relay: it stands between the simulated network and the real relay and, as the seed
 * says, answers a `receive` dishonestly — it withholds the page (the mail stays in the relay and
 * comes on a later receive), reorders the page's mail, or adds one delivery the relay never
 * admitted, placed before the mail it was made from when that is in the page:
 * - `replay`: mail it carried to that endpoint before, under its own envelope id or a new one;
 * - `rewrite`: such mail with its content changed, the sender's signature kept (re-sealed from the
 *   relay's own seal key — it cannot seal as the sender);
 * - `forge`: such mail re-signed with the relay's own key, the sender's name claimed; a hello
 *   answer of its own for a hello it carried;
 * - `junk`: an envelope whose payload is not a task payload at all.
 * What it changes is new to the receiver (new event and intent ids) and every text a person wrote
 * carries `FORGED_MARK`: the nothing-forged-believed invariant looks for it.
 *
 * The client acknowledges by envelope id, so which cursor carries which envelope is the hostile
 * relay's to choose. An added delivery needs a cursor of its own: per mailbox, the hostile relay keeps the cursors it
 * made up and translates both ways (the client's cursor to the relay's on the request, the relay's
 * to the client's on the reply), so the real mailbox loses nothing. Only `receive` is translated:
 * the simulated Pis pass by receiving (watching is the extension's scheduler, not the core's).
 */
import { canonicalJson } from "../../src/protocol/canonical-json.ts";
import { encodeHello, encodePayload, newId, openPayload, sealSigned } from "../../src/core/envelopes.ts";
import type { SealedWirePayload, SignatureBlock, TaskEndpoint } from "../../src/protocol/schemas.ts";
import type { Identity } from "../../src/trust/keys.ts";
import type { SimRandom } from "./random.ts";

/** What a hostile relay does to one receive, with how likely each is (per receive). */
export interface HostileRates {
  readonly withhold: number;
  readonly reorder: number;
  readonly replay: number;
  readonly rewrite: number;
  readonly forge: number;
  readonly junk: number;
}

export const NO_HOSTILITY: HostileRates = { withhold: 0, reorder: 0, replay: 0, rewrite: 0, forge: 0, junk: 0 };

/** Text the hostile relay writes into whatever it changes: no session may ever believe it. */
export const FORGED_MARK = "FORGED-BY-THE-RELAY";

/** Envelopes the hostile relay remembers per endpoint, to replay and rewrite (the oldest goes first). */
const MAX_REMEMBERED_ENVELOPES = 16;

export type HostileAct = keyof HostileRates;

export interface HostileRelay {
  /** Hands `request` to the relay through `relayFetch`, and answers as the seed says. */
  handle(request: Request, relayFetch: typeof fetch): Promise<Response>;
  setRates(rates: HostileRates): void;
  /** The relay's own key: content sealed to it leaked (proof-before-content). */
  readonly identity: Identity;
  /** How often it did each thing. */
  acts(): Readonly<Record<HostileAct, number>>;
}

export interface HostileRelayOptions {
  readonly random: SimRandom;
  readonly identity: Identity;
  /** Every identity of the world (it knows what it carries; it cannot sign as them). */
  readonly recipients: () => readonly Identity[];
  readonly rates: HostileRates;
  /** The wall clock (its own hellos' signing time). */
  readonly now: () => number;
  /** Told each dishonest answer, in words (the run's trace). */
  readonly onAct?: (text: string) => void;
}

type Envelope = Record<string, unknown> & { envelopeId: string; source: TaskEndpoint; target: TaskEndpoint; payload: unknown };
interface Delivery {
  cursor: string;
  envelope: Envelope;
}

/** One mailbox as the client sees it: the relay cursors after which a made-up delivery sits, in order. */
class Mailbox {
  private readonly after: bigint[] = [];
  /** The client's cursor for a relay cursor. */
  toClient(relay: bigint): bigint {
    return relay + BigInt(this.after.filter((at) => at < relay).length);
  }
  /** The relay's cursor for a client's cursor (a made-up one maps to the relay cursor it follows). */
  toRelay(client: bigint): bigint {
    let made = 0n;
    this.after.forEach((at, index) => {
      if (at + BigInt(index + 1) <= client) made += 1n;
    });
    return client - made;
  }
  /** Whether a made-up delivery may follow relay cursor `at` (never before one made up already). */
  canAdd(at: bigint): boolean {
    return this.after.every((earlier) => earlier <= at);
  }
  /** Makes up a delivery after relay cursor `at`: its client cursor. */
  add(at: bigint): bigint {
    this.after.push(at);
    return at + BigInt(this.after.length);
  }
}

/**
 * A payload made new by the forger: every text a person wrote (a string with a space in it) marked,
 * every event and intent id new, every sequence one on — mail the receiver has not seen, so only its
 * gate can stop it.
 */
function forged(value: unknown, key = ""): unknown {
  if (typeof value === "string") {
    if (key === "eventId" || key === "intentId") return newId();
    if (key === "sequence" && /^[0-9]+$/.test(value)) return String(BigInt(value) + 1n);
    return value.includes(" ") ? `${value} ${FORGED_MARK}` : value;
  }
  if (Array.isArray(value)) return value.map((item) => forged(item));
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([name, item]) => [name, forged(item, name)]));
  return value;
}

const isSealed = (payload: unknown): payload is SealedWirePayload =>
  typeof payload === "object" && payload !== null && "sealed" in payload && "taskId" in payload;

/** What one hostile relay keeps: its rates, the cursors it made up per mailbox, the mail it remembers, its counts. */
interface Hostility {
  readonly options: HostileRelayOptions;
  rates: HostileRates;
  readonly mailboxes: Map<string, Mailbox>;
  readonly remembered: Map<string, Envelope[]>;
  readonly acts: Record<HostileAct, number>;
}

function remember(state: Hostility, endpointId: string, envelopes: readonly Envelope[]): void {
  const list = state.remembered.get(endpointId) ?? [];
  list.push(...envelopes);
  state.remembered.set(endpointId, list.slice(-MAX_REMEMBERED_ENVELOPES));
}

/** Opens a sealed envelope as its recipient would: its content, or undefined. */
function opened(recipients: readonly Identity[], envelope: Envelope) {
  const payload = envelope.payload;
  if (!isSealed(payload)) return undefined;
  const recipient = recipients.find((each) => each.seal?.().publicKey === payload.sealed.to);
  if (recipient === undefined) return undefined;
  try {
    return { wire: payload, ...openPayload(recipient, payload) };
  } catch {
    return undefined;
  }
}

type MadeUpAct = Exclude<HostileAct, "withhold" | "reorder">;

/** The made-up envelope for `act`, from one the relay carried to this endpoint; undefined when it cannot make one from it. */
function madeUp(state: Hostility, act: MadeUpAct, from: Envelope): Envelope | undefined {
  const { random, identity } = state.options;
  if (act === "replay") return random.chance(0.5) ? from : { ...from, envelopeId: newId() };
  if (act === "junk") return { ...from, envelopeId: newId(), payload: { taskId: newId(), kind: "assignment", junk: FORGED_MARK } };
  const hello = from.payload as { kind?: string; payload?: { inReplyTo?: string } };
  if (act === "forge" && hello.kind === "hello") {
    const extra = hello.payload?.inReplyTo === undefined ? {} : { inReplyTo: hello.payload.inReplyTo };
    return JSON.parse(encodeHello(from.source, from.target, { identity }, state.options.now(), extra).encoded.text) as Envelope;
  }
  const carried = opened(state.options.recipients(), from);
  if (carried === undefined) return undefined;
  const { wire, payload } = carried;
  const content = forged(payload.payload);
  const signature = payload.signature as SignatureBlock;
  const signer = { identity, ...(signature.name === undefined ? {} : { claimedName: signature.name }) };
  const signing = { signer, from: from.source, to: from.target, atMs: Date.parse(signature.at) };
  const sealedText =
    act === "rewrite"
      ? sealSigned(identity, wire.sealed.to, wire.taskId, wire.kind, canonicalJson(content), signature)
      : encodePayload(wire.taskId, wire.kind, content as never, signing, { sealTo: wire.sealed.to });
  return { ...from, envelopeId: newId(), payload: JSON.parse(sealedText) };
}

/** The act drawn for this receive, or undefined for an honest answer. */
function draw(state: Hostility): HostileAct | undefined {
  for (const act of Object.keys(state.acts) as HostileAct[]) if (state.options.random.chance(state.rates[act])) return act;
  return undefined;
}

const answer = (body: Record<string, unknown>, value: unknown) => Response.json({ ...body, value });

/** The request as the relay must see it: the client's cursor translated to the relay's. */
function forwarded(request: Request, body: Record<string, unknown>, relayCursor: bigint): Request {
  const headers = new Headers(request.headers);
  headers.delete("content-length");
  return new Request(request.url, { method: request.method, headers, body: JSON.stringify({ ...body, cursor: String(relayCursor) }) });
}

type PageReply = Record<string, unknown> & { ok?: boolean; value?: { kind?: string; deliveries: Delivery[]; hasMore: boolean } };

async function receive(state: Hostility, request: Request, body: Record<string, unknown>, relayFetch: typeof fetch): Promise<Response> {
  const endpointId = String((body.endpoint as { id?: unknown } | undefined)?.id);
  const key = `${String(body.epoch)}/${endpointId}`;
  const mailbox = state.mailboxes.get(key) ?? new Mailbox();
  state.mailboxes.set(key, mailbox);
  const clientCursor = BigInt(String(body.cursor));
  const relayCursor = mailbox.toRelay(clientCursor);
  const response = await relayFetch(forwarded(request, body, relayCursor) as never);
  const reply = (await response.json()) as PageReply;
  const page = reply.value;
  if (reply.ok !== true || page?.kind !== "page") return Response.json(reply, { status: response.status });
  const real = page.deliveries;
  const envelopes = real.map((delivery) => delivery.envelope);
  const deliveries = real.map((delivery) => ({ ...delivery, cursor: String(mailbox.toClient(BigInt(delivery.cursor))) }));
  const honest = () => answer(reply, { ...page, deliveries, nextCursor: deliveries.at(-1)?.cursor ?? String(clientCursor) });
  const act = draw(state);
  const tell = (text: string) => {
    state.acts[act!] += 1;
    state.options.onAct?.(`the relay ${text} to ${endpointId}`);
  };
  if (act === "withhold" && real.length > 0) {
    tell(`withholds ${real.length} deliveries`);
    return answer(reply, { ...page, deliveries: [], nextCursor: String(clientCursor), hasMore: false });
  }
  if (act === "reorder" && real.length > 1) {
    tell(`reorders ${real.length} deliveries`);
    const rotated = deliveries.map((delivery, index) => ({ ...delivery, envelope: envelopes.at(index - 1)! }));
    return answer(reply, { ...page, deliveries: rotated, nextCursor: rotated.at(-1)!.cursor });
  }
  const old = (state.remembered.get(endpointId) ?? []).filter((each) => !envelopes.some((one) => one.envelopeId === each.envelopeId));
  remember(state, endpointId, envelopes);
  // Mail in this page is news to the receiver: what the relay makes up from when it has some (a replay is of old mail).
  const candidates = act !== "replay" && envelopes.length > 0 ? envelopes : old;
  const last = real.length === 0 ? relayCursor : BigInt(real.at(-1)!.cursor);
  const limit = typeof body.limit === "number" ? body.limit : Number.POSITIVE_INFINITY;
  const room = !page.hasMore && real.length < limit && mailbox.canAdd(last);
  if (act === undefined || act === "withhold" || act === "reorder" || !room || candidates.length === 0) return honest();
  const source = state.options.random.pick(candidates);
  const extra = madeUp(state, act, source);
  if (extra === undefined) return honest();
  tell(
    act === "junk"
      ? "sends junk"
      : `${act}s ${String((extra.payload as { kind?: unknown }).kind)} ${extra.envelopeId} (from ${source.envelopeId})`,
  );
  // The made-up envelope comes before the one it was made from (a rewrite seen first is the one that matters).
  const at = envelopes.indexOf(source);
  const order = at < 0 ? [...envelopes, extra] : [...envelopes.slice(0, at), extra, ...envelopes.slice(at)];
  const cursors = [...deliveries.map((delivery) => delivery.cursor), String(mailbox.add(last))];
  return answer(reply, {
    ...page,
    deliveries: order.map((envelope, index) => ({ cursor: cursors[index]!, envelope })),
    nextCursor: cursors.at(-1)!,
  });
}

export function createHostileRelay(options: HostileRelayOptions): HostileRelay {
  const state: Hostility = {
    options,
    rates: options.rates,
    mailboxes: new Map(),
    remembered: new Map(),
    acts: { withhold: 0, reorder: 0, replay: 0, rewrite: 0, forge: 0, junk: 0 },
  };
  return {
    identity: options.identity,
    setRates: (next) => void (state.rates = next),
    acts: () => ({ ...state.acts }),
    handle: async (request, relayFetch) => {
      if (request.method !== "POST") return relayFetch(request as never);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(await request.clone().text()) as Record<string, unknown>;
      } catch {
        return relayFetch(request as never);
      }
      return body.operation === "receive" ? receive(state, request, body, relayFetch) : relayFetch(request as never);
    },
  };
}
