/** What a socket adapter gives back: the port it listens on, and how to stop it. */
export interface ListeningSocket {
  readonly port: number;
  /** Stops listening and closes open connections. */
  stop(): Promise<void>;
}
