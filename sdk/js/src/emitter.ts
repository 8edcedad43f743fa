// A small typed event emitter: listeners run synchronously, in the order they were added, and a
// listener that throws does not stop the others (its error is reported, not thrown).

/** Removes the listener it was returned for. */
export type Unsubscribe = () => void;

function report(e: unknown): void {
  const g = globalThis as { reportError?: (e: unknown) => void };
  if (typeof g.reportError === "function") g.reportError(e);
  else console.error(e);
}

export class Emitter<M> {
  private readonly listeners = new Map<keyof M, Set<(v: never) => void>>();

  /** Calls fn with every event of that name; returns a function that removes it. */
  on<K extends keyof M>(name: K, fn: (value: M[K]) => void): Unsubscribe {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(fn as (v: never) => void);
    return () => this.off(name, fn);
  }

  /** Calls fn with the next event of that name only. */
  once<K extends keyof M>(name: K, fn: (value: M[K]) => void): Unsubscribe {
    const off = this.on(name, (v) => {
      off();
      fn(v);
    });
    return off;
  }

  /** Removes a listener added with on. */
  off<K extends keyof M>(name: K, fn: (value: M[K]) => void): void {
    this.listeners.get(name)?.delete(fn as (v: never) => void);
  }

  /** Calls the listeners of name with value. */
  protected emit<K extends keyof M>(name: K, value: M[K]): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        (fn as (v: M[K]) => void)(value);
      } catch (e) {
        report(e);
      }
    }
  }
}
