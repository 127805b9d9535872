/**
 * Internal. The business effects: a worker per writer subtask ({@link
 * io.onceflow.sink.postgres.internal.effects.EffectWorker}) drains the queue of effects whose
 * inbox rows have committed, off the task thread, in transactions of its own that lock what each
 * effect declares it touches ({@link io.onceflow.sink.postgres.internal.effects.EffectKeys}) and
 * call the function in source order ({@link io.onceflow.sink.postgres.internal.effects.EffectCalls}).
 */
package io.onceflow.sink.postgres.internal.effects;
