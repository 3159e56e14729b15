"""Offline model of KAI's fair share: what each queue gets, before anything is deployed."""
