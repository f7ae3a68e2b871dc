#!/usr/bin/env python3
"""Unit tests of the soak script's verdict logic: python3 scripts/soak_checks_test.py
(run by crates/horde-cli/tests/soak.rs)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402


class Checks(unittest.TestCase):
    def test_an_empty_check_is_no_data_and_a_failed_one_fails(self):
        self.assertIsNone(soak.all_ok([]))
        self.assertTrue(soak.all_ok([True, True]))
        self.assertFalse(soak.all_ok([True, False]))
        self.assertEqual(soak.status(None), "no data")
        self.assertEqual(soak.status(False), "FAILED")
        self.assertEqual(soak.status(True), "ok")

    def test_a_run_passes_with_a_check_without_data_but_not_with_a_failure(self):
        base = {"accounting": True, "no_stall": True, "rss_flat": True}
        self.assertTrue(soak.passed({**base, "agreement": None}))
        self.assertFalse(soak.passed({**base, "agreement": False}))
        self.assertFalse(soak.passed({**base, "rss_flat": False, "agreement": None}))
        self.assertFalse(soak.passed({"accounting": None, "agreement": None}),
                         "nothing checked at all is not a pass")

    def test_accounting_counts_reports_and_missing_reports(self):
        killed = {"index": 0, "how": "SIGKILL", "report": None}
        good = {"index": 1, "how": "SIGINT", "balanced": True}
        bad = {"index": 2, "how": "SIGINT", "balanced": False}
        missing = {"index": 3, "how": "SIGINT", "error": "no JSON report"}
        self.assertIsNone(soak.accounting_check([killed]), "only killed senders")
        self.assertTrue(soak.accounting_check([killed, good]))
        self.assertFalse(soak.accounting_check([killed, good, bad]))
        self.assertFalse(soak.accounting_check([good, missing]))


if __name__ == "__main__":
    unittest.main()
