/**
 * A party (testkit/party.ts) whose transport records every relay request with the reply it got
 * (`observingFetch`), so a test can see what reached the client, not only what the relay did.
 */
import { createParty, type Party, type PartyOptions } from "./party.ts";
import { type ObservedReply, observingFetch } from "./observing-fetch.ts";

export interface ObservedParty extends Party {
  /** Every relay request of this party with the reply it got. */
  readonly replies: ObservedReply[];
}

export interface ObservedPartyOptions extends Omit<PartyOptions, "fetch"> {
  /** Wraps the recording fetch (e.g. to fail requests before they leave). */
  readonly wrapFetch?: (inner: typeof fetch) => typeof fetch;
}

export async function createObservedParty(options: ObservedPartyOptions): Promise<ObservedParty> {
  const replies: ObservedReply[] = [];
  const recording = observingFetch(replies);
  const { wrapFetch, ...rest } = options;
  const party = await createParty({ ...rest, fetch: wrapFetch?.(recording) ?? recording });
  return { ...party, replies };
}
