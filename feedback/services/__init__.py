"""Streaming services of the feedback loop: Kafka adapters around the pure feedback logic.

* :mod:`~feedback.services.label_service`: decisions ⋈ outcomes -> ``feedback.labels`` (exactly once);
* :mod:`~feedback.services.sampler_service`: labels -> committee-scored active sampling -> ``training.examples``;
* :mod:`~feedback.services.trainer_service`: examples -> river online model, guarded LightGBM updates, registry.
"""
