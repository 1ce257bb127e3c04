/**
 * Simulated time. Every device reads the time and schedules its periodic work (interval
 * records, heartbeats, sensor readings) through a clock; a pool shares one clock, so
 * thousands of devices share one timer (a binary heap of due tasks) instead of holding
 * one timer each.
 */
export interface ScheduledTask {
  readonly due: number;
  cancelled: boolean;
}

interface Task extends ScheduledTask {
  due: number;
  order: number;
  fn: () => void;
}

export interface Clock {
  /** Simulated epoch milliseconds. */
  now(): number;
  /** How many simulated milliseconds pass per real millisecond (1 = real time). */
  readonly speed: number;
  /** Runs fn once the simulated time reaches dueMs. */
  at(dueMs: number, fn: () => void): ScheduledTask;
  cancel(task: ScheduledTask | undefined): void;
  /** Real milliseconds that correspond to a simulated duration. */
  realMs(simMs: number): number;
  /** Stops the shared timer; tasks due later never run. */
  stop(): void;
}

class TaskHeap {
  private items: Task[] = [];
  get size(): number {
    return this.items.length;
  }
  peek(): Task | undefined {
    return this.items[0];
  }
  push(task: Task): void {
    const a = this.items;
    a.push(task);
    let k = a.length - 1;
    while (k > 0) {
      const parent = (k - 1) >> 1;
      if (!less(a[k]!, a[parent]!)) break;
      [a[k], a[parent]] = [a[parent]!, a[k]!];
      k = parent;
    }
  }
  pop(): Task | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let k = 0;
      for (;;) {
        const l = 2 * k + 1;
        const r = l + 1;
        let m = k;
        if (l < a.length && less(a[l]!, a[m]!)) m = l;
        if (r < a.length && less(a[r]!, a[m]!)) m = r;
        if (m === k) break;
        [a[k], a[m]] = [a[m]!, a[k]!];
        k = m;
      }
    }
    return top;
  }
  clear(): void {
    this.items = [];
  }
}

function less(a: Task, b: Task): boolean {
  return a.due < b.due || (a.due === b.due && a.order < b.order);
}

abstract class HeapClock implements Clock {
  protected heap = new TaskHeap();
  private order = 0;
  abstract readonly speed: number;
  abstract now(): number;
  protected abstract rearm(): void;

  at(dueMs: number, fn: () => void): ScheduledTask {
    const task: Task = { due: dueMs, order: this.order++, fn, cancelled: false };
    const before = this.heap.peek();
    this.heap.push(task);
    if (this.heap.peek() !== before) this.rearm();
    return task;
  }

  cancel(task: ScheduledTask | undefined): void {
    if (task) task.cancelled = true;
  }

  realMs(simMs: number): number {
    return simMs / this.speed;
  }

  /** Tasks waiting (including cancelled ones not yet dropped). */
  get pending(): number {
    return this.heap.size;
  }

  /**
   * Runs every task due at or before `until`, in due order; a task may schedule more. With
   * `budgetMs` it stops after that much wall time and answers false (tasks are still due).
   */
  protected runDue(until: number, setNow?: (t: number) => void, budgetMs = Infinity): boolean {
    const stopAt = performance.now() + budgetMs;
    for (;;) {
      const top = this.heap.peek();
      if (!top || top.due > until) return true;
      if (performance.now() > stopAt) return false;
      this.heap.pop();
      if (top.cancelled) continue;
      setNow?.(top.due);
      try {
        top.fn();
      } catch (err) {
        process.emitWarning(`device-sim task failed: ${(err as Error).message}`);
      }
    }
  }

  abstract stop(): void;
}

/** Longest a SimClock runs due tasks before it lets the event loop run (then it goes on). */
const FIRE_BUDGET_MS = 20;

/**
 * Real time, optionally accelerated: simulated time starts at `origin` (default: now) and
 * runs `speed` times faster than the wall clock. One timer serves every task.
 */
export class SimClock extends HeapClock {
  readonly speed: number;
  readonly origin: number;
  private readonly realStart = performance.now();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;
  private stopped = false;
  private keepAlive = false;

  constructor(options: { speed?: number; origin?: number } = {}) {
    super();
    this.speed = options.speed ?? 1;
    if (!(this.speed > 0) || !Number.isFinite(this.speed)) throw new Error('speed must be a positive number');
    this.origin = options.origin ?? Date.now();
  }

  now(): number {
    return this.origin + (performance.now() - this.realStart) * this.speed;
  }

  protected rearm(): void {
    if (this.stopped) return;
    const top = this.heap.peek();
    if (!top) return;
    if (this.timer && top.due >= this.armedFor) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = top.due;
    const delay = Math.max(0, Math.ceil((top.due - this.now()) / this.speed));
    this.timer = setTimeout(() => this.fire(), Math.min(delay, 2 ** 31 - 1));
    if (!this.keepAlive) this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    // Devices that fall behind an accelerated clock (many of them on a busy machine) catch up in
    // slices: between two slices the process does its I/O, so what they publish goes out and
    // the host stays responsive instead of computing simulated time in one long block.
    this.runDue(this.now(), undefined, FIRE_BUDGET_MS);
    this.rearm();
  }

  /** Keeps the process alive while tasks wait (the CLI wants this; tests and libraries do not). */
  ref(): void {
    this.keepAlive = true;
    this.timer?.ref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.heap.clear();
  }
}

/**
 * Time that moves only when a test says so: `advance(ms)` runs every task that falls due,
 * in order, with now() reading each task's due time while it runs.
 */
export class ManualClock extends HeapClock {
  readonly speed: number;
  private current: number;

  /** `speed` here only converts simulated delays to real ones (e.g. a reboot's pause). */
  constructor(origin = Date.now(), speed = 1000) {
    super();
    this.current = origin;
    this.speed = speed;
  }

  now(): number {
    return this.current;
  }

  protected rearm(): void {
    // Nothing runs until advance().
  }

  advance(ms: number): void {
    const target = this.current + ms;
    this.runDue(target, (t) => {
      this.current = Math.max(this.current, t);
    });
    this.current = target;
  }

  set(epochMs: number): void {
    if (epochMs < this.current) throw new Error('a manual clock never goes back');
    this.advance(epochMs - this.current);
  }

  stop(): void {
    this.heap.clear();
  }
}
