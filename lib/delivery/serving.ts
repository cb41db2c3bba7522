/**
 * What the delivery daemon runs while it holds the lease, armed and disarmed as one: its
 * durables, the fan-out and reader loops, the rails (`ctl.delivery`), the member-row prune, the
 * consumer janitor and the storage warden, all under a fresh fence token; the lease marked ready
 * last.
 *
 * @module
 */
import type { Subscription } from "nats";
import { CotalError } from "../errors.ts";
import { startConsumerJanitor } from "./consumer_janitor.ts";
import type { DeliveryContext } from "./context.ts";
import { ensureFanoutDurable, ensureReaderDurable } from "./durables.ts";
import { startFanout } from "./fanout.ts";
import type { DeliveryLease } from "./lease.ts";
import { startRowPrune } from "./membership_ops.ts";
import type { PullLoop } from "./pull_loop.ts";
import { startReader } from "./reader.ts";
import { type AdminHooks, bindRails } from "./service.ts";
import { StorageWarden } from "./warden.ts";

/** The daemon's serving parts: started by `arm()`, stopped by `disarm()`. */
export class DeliveryServing {
  readonly #ctx: DeliveryContext;
  readonly #lease: DeliveryLease;
  readonly #hooks: Omit<AdminHooks, "ready">;
  #loops: PullLoop[] = [];
  #rails: Subscription[] = [];
  #prune?: { stop(): void };
  #janitor?: { stop(): void };
  #ready = false;

  constructor(ctx: DeliveryContext, lease: DeliveryLease, hooks: Omit<AdminHooks, "ready">) {
    this.#ctx = ctx;
    this.#lease = lease;
    this.#hooks = hooks;
  }

  /** True while the lease is held and every loop and rail is bound. */
  get ready(): boolean {
    return this.#ready;
  }

  /** Binds everything and marks the lease ready; throws `lease_lost` if it changed hands. */
  async arm(): Promise<void> {
    const ctx = this.#ctx;
    ctx.fence.activate();
    await ensureFanoutDurable(ctx);
    await ensureReaderDurable(ctx);
    this.#loops = [await startFanout(ctx), await startReader(ctx)];
    this.#rails = bindRails(ctx, { ...this.#hooks, ready: () => this.#ready });
    this.#prune = startRowPrune(ctx, ctx.fence.token);
    this.#janitor = startConsumerJanitor(ctx, ctx.fence.token);
    ctx.warden = new StorageWarden(ctx, ctx.fence.token);
    ctx.warden.start();
    ctx.setaside?.start();
    await ctx.nc.flush();
    if (!(await this.#lease.write({ ready: true }))) {
      throw new CotalError("lease_lost", "The lease changed hands while starting.");
    }
    this.#ready = true;
  }

  /** Quiesces the fence and stops every loop, rail and timer (the lease is left as it is). */
  async disarm(): Promise<void> {
    const ctx = this.#ctx;
    this.#ready = false;
    ctx.fence.quiesce();
    for (const s of this.#rails) s.unsubscribe();
    this.#rails = [];
    this.#prune?.stop();
    this.#prune = undefined;
    this.#janitor?.stop();
    this.#janitor = undefined;
    ctx.warden?.stop();
    ctx.warden = undefined;
    await Promise.allSettled(this.#loops.map((l) => l.stop()));
    this.#loops = [];
  }
}
