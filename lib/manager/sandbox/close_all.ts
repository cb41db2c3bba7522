/**
 * Closing the supervisor's sockets and connections at teardown, where one may already be closed
 * (its peer hung up, or a deadline closed it): that is no error.
 *
 * @module
 */

/** Closes each of `resources`; one already closed is skipped. */
export function closeAll(resources: Iterable<{ close(): void }>): void {
  for (const r of resources) {
    try {
      r.close();
    } catch {
      // Already closed.
    }
  }
}
