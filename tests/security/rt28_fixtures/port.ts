import { freePort } from "../../_harness/broker.ts";

/** A free loopback port (red team 28 ran in its own range; the suite takes any free one). */
export function rt28Port(): number {
  return freePort();
}
