/**
 * A typed `EventTarget` whose listeners cannot kill the host.
 *
 * Deno reports an exception thrown by an `EventTarget` listener (or a rejected promise an
 * async listener returns) as uncaught, which ends the process. An endpoint outlives many such
 * faults, so every listener is wrapped: a throw becomes an `error` event (or is dropped, when
 * the failing listener is itself an `error` or `warning` listener, to avoid a loop).
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { EndpointErrorEvent, type EndpointEventMap } from "./events.ts";

/** A listener of one typed endpoint event; it may be async. */
export type EndpointListener<E extends Event> = (ev: E) => void | Promise<void>;

/** Any DOM event listener (what `addEventListener` takes for an untyped event name). */
export type AnyListener = EventListenerOrEventListenerObject;

/** `EventTarget` with typed `addEventListener` overloads and contained listener faults. */
export class EndpointEvents extends EventTarget {
  // original listener -> "<type>|<capture>" -> wrapper, so removeEventListener still works.
  readonly #wrappers = new WeakMap<object, Map<string, EventListener>>();
  readonly #counts = new Map<string, number>();

  /** Add a typed listener. */
  override addEventListener<K extends keyof EndpointEventMap>(
    type: K,
    listener: EndpointListener<EndpointEventMap[K]> | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  /** Add a listener of any event type. */
  override addEventListener(
    type: string,
    listener: AnyListener | null,
    options?: boolean | AddEventListenerOptions,
  ): void;
  override addEventListener(
    type: string,
    listener: AnyListener | EndpointListener<Event> | null,
    options?: boolean | AddEventListenerOptions,
  ): void {
    if (!listener) return;
    const capture = typeof options === "boolean" ? options : options?.capture === true;
    const once = typeof options === "object" && options?.once === true;
    const key = `${type}|${capture}`;
    let byKey = this.#wrappers.get(listener);
    if (byKey?.has(key)) return;
    if (!byKey) this.#wrappers.set(listener, byKey = new Map());
    const wrapper: EventListener = (ev) => {
      if (once) this.#forget(listener, key, type);
      this.#invoke(listener as AnyListener, ev);
    };
    byKey.set(key, wrapper);
    this.#counts.set(type, (this.#counts.get(type) ?? 0) + 1);
    super.addEventListener(type, wrapper, options);
    this.listenerAdded(type);
  }

  /** Remove a listener added with {@linkcode addEventListener}. */
  override removeEventListener<K extends keyof EndpointEventMap>(
    type: K,
    listener: EndpointListener<EndpointEventMap[K]> | null,
    options?: boolean | EventListenerOptions,
  ): void;
  /** Remove a listener of any event type. */
  override removeEventListener(
    type: string,
    listener: AnyListener | null,
    options?: boolean | EventListenerOptions,
  ): void;
  override removeEventListener(
    type: string,
    listener: AnyListener | EndpointListener<Event> | null,
    options?: boolean | EventListenerOptions,
  ): void {
    if (!listener) return;
    const capture = typeof options === "boolean" ? options : options?.capture === true;
    const key = `${type}|${capture}`;
    const wrapper = this.#wrappers.get(listener)?.get(key);
    if (!wrapper) return;
    this.#forget(listener, key, type);
    super.removeEventListener(type, wrapper, options);
  }

  /** How many listeners of `type` are attached. */
  listenerCount(type: keyof EndpointEventMap): number {
    return this.#counts.get(type) ?? 0;
  }

  #forget(listener: object, key: string, type: string): void {
    if (this.#wrappers.get(listener)?.delete(key)) {
      this.#counts.set(type, Math.max(0, (this.#counts.get(type) ?? 1) - 1));
    }
  }

  #invoke(listener: AnyListener, ev: Event): void {
    try {
      const r: unknown = typeof listener === "function"
        ? listener.call(this, ev)
        : listener.handleEvent(ev);
      if (r && typeof (r as Promise<void>).then === "function") {
        (r as Promise<void>).then(undefined, (err) => this.#failed(ev, err));
      }
    } catch (err) {
      this.#failed(ev, err);
    }
  }

  /** Hook for subclasses: a listener of `type` was just added. */
  protected listenerAdded(_type: string): void {}

  /** Hook for subclasses: a listener of `ev` failed (called before the error event). */
  protected listenerFailed(_ev: Event, _err: unknown): void {}

  #failed(ev: Event, err: unknown): void {
    this.listenerFailed(ev, err);
    if (ev.type === "error" || ev.type === "warning") return;
    const msg = err instanceof Error ? err.message : String(err);
    this.dispatchEvent(
      new EndpointErrorEvent(
        new CotalError(
          "listener_failed",
          `A ${ev.type} listener threw (${
            msg.slice(0, 200)
          }); the endpoint carried on, fix the listener.`,
          { cause: err },
        ),
      ),
    );
  }
}
