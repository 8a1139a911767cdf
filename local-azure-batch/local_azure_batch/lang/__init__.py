"""Text the service reads: the shared tokenizer of its small languages, timestamps and durations."""
