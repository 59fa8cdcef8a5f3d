// Responses kept for the Responses API's `store` and `previous_response_id`:
// the record and the interface the router depends on. A part of its own, as
// keys are, so the router needs nothing of the store but this interface, and
// the store nothing of the router. Every read and delete is by key: one API
// key never reads, continues or deletes another's responses, and a response
// of another key answers exactly as one that does not exist.

/** One kept response. */
export interface StoredResponse {
  /**
   * The response's id as the client saw it (`resp_…`): the router's own,
   * random (128 bits), whatever an engine answered. Unique per key; two
   * keys' responses are apart even under one id.
   */
  readonly id: string;
  /**
   * The id the engine gave it, where an engine serving the Responses API
   * natively answered and the router replaced its id; absent or null =
   * none other. A client of the same key that names it (in
   * previous_response_id, GET or DELETE) is served this response.
   */
  readonly engineId?: string | null;
  /** The key that made it; 'anonymous' when the listener asks no key. Only this key reads, continues or deletes it. */
  readonly keyId: string;
  /** The model's canonical name. */
  readonly model: string;
  readonly createdAtMs: number;
  /** The Response object as the client received it (status completed, incomplete or failed), returned by GET. */
  readonly response: Readonly<Record<string, unknown>>;
  /**
   * The conversation up to and including this response, as Responses input
   * items: the items of the response it continued (if any), this request's
   * input, then this response's output items. A request naming it as
   * previous_response_id continues from exactly these. Instructions are not
   * among them: as at OpenAI, each request brings its own.
   */
  readonly items: readonly unknown[];
}

/** Where responses are kept: in memory for a control plane without a store, in the store otherwise. */
export interface ResponseStore {
  /**
   * Keeps a response until its time to live passes. When the key's kept
   * responses then exceed its size cap, its oldest are dropped first (never
   * the one just kept).
   */
  put(response: StoredResponse): Promise<void>;
  /**
   * The response if this key kept it and it has not expired; undefined
   * otherwise (unknown, expired, deleted, another key's). `id` is the
   * router's id, or else an engine's id for one of this key's (its newest).
   */
  get(keyId: string, id: string): Promise<StoredResponse | undefined>;
  /** True when this key had it (by either id, as `get`) and it is now gone; false when there was nothing of this key's to delete. */
  delete(keyId: string, id: string): Promise<boolean>;
  /**
   * Output items of this key's kept, unexpired responses, by item id, for
   * the Responses API's `item_reference` input items (the AI SDK sends its
   * earlier answers' text as references when `store` is on). Ids not found
   * (unknown, expired, another key's) are absent from the map.
   */
  findItems(keyId: string, itemIds: readonly string[]): Promise<ReadonlyMap<string, unknown>>;
  /** Drops every response past its time to live; returns how many went. */
  sweep(nowMs: number): Promise<number>;
}
