"""Kafka: judge Rasa's Kafka event broker as a consumer group (``kafka://`` sources).

``options`` parses a ``kafka://`` spec and maps Rasa's broker settings to
librdkafka's; ``clients`` builds every librdkafka client one way (its log
kept off the terminal, its errors collected, the connection check);
``member`` is one member of the consumer group (partitions, state moving
with them, verdict and stop topics, offsets committed after both), with its
parts: ``reading`` (messages to the evaluator), ``keys`` (which partitions
are in order), ``stamped`` (an unkeyed topic merged by record time),
``ledger`` (what a commit writes and commits), ``commits`` (the commit
itself), ``publisher`` (its producer),
``group`` (topics, the group, the state topic); ``rekey`` copies an unkeyed
topic to one keyed by conversation id. confluent-kafka (the ``kafka``
extra) is imported only by the modules that build clients.
"""

__all__: list[str] = []
