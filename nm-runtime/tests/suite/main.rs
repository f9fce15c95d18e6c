//! nm-runtime's fast tier (no JVM): the `mapreduce_shuffle` service over real sockets.

mod shuffle;
