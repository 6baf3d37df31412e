"""The cluster tier: end-to-end acceptance tests that run ``podwright`` as a user does, against
the API-server emulator in every run and, unchanged, against the real cluster named by
``PODWRIGHT_TEST_KUBECONFIG`` (the ``cluster`` marker)."""
