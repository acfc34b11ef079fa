"""Handing out judging work: N distinct annotators, no repeats, balance,
no starvation, reclaim after timeout, and concurrent requests."""
import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from annotation.models import Assignment, Campaign, Item
from annotation.services import assignment_next, judgment_submit

ALL_A = {"naturalness": "A", "relevance": "A", "overall_quality": "A"}


def _judge(assignment):
    judgment_submit(token=assignment.token, annotator=assignment.annotator, choices=ALL_A)


def _live_counts(campaign) -> Counter:
    live = Assignment.objects.filter(campaign=campaign).exclude(status=Assignment.Status.EXPIRED)
    return Counter(live.values_list("item_id", flat=True))


def test_it_gives_each_item_to_exactly_n_distinct_annotators(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    items = make_items(campaign, 4)
    people = annotators(5)
    for person in people:
        while (assignment := assignment_next(campaign=campaign, annotator=person)) is not None:
            _judge(assignment)
    for item in items:
        judges = list(item.assignments.values_list("annotator_id", flat=True))
        assert len(judges) == 3 and len(set(judges)) == 3


def test_it_resumes_the_open_assignment_instead_of_handing_out_another(make_campaign, make_items, annotators):
    campaign = make_campaign()
    make_items(campaign, 3)
    (person,) = annotators(1)
    first = assignment_next(campaign=campaign, annotator=person)
    assert assignment_next(campaign=campaign, annotator=person) == first
    _judge(first)
    second = assignment_next(campaign=campaign, annotator=person)
    assert second.item_id != first.item_id


def test_it_never_gives_an_annotator_the_same_item_twice(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=2)
    make_items(campaign, 3)
    (person,) = annotators(1)
    seen = []
    while (assignment := assignment_next(campaign=campaign, annotator=person)) is not None:
        seen.append(assignment.item_id)
        _judge(assignment)
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 3


def test_it_keeps_item_load_within_one_and_never_starves_a_fast_annotator(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    make_items(campaign, 5)
    fast, *slow = annotators(4)
    for person in slow:  # slow annotators each take one item and sit on it
        assignment_next(campaign=campaign, annotator=person)
        counts = _live_counts(campaign)
        assert max(counts.values()) - min(counts.get(item.pk, 0) for item in campaign.items.all()) <= 1
    done = 0
    while (assignment := assignment_next(campaign=campaign, annotator=fast)) is not None:
        _judge(assignment)
        done += 1
    assert done == 5  # every item still had room for the fast annotator


def test_it_skips_items_still_waiting_for_human_feedback(make_campaign, make_items, annotators):
    campaign = make_campaign()
    make_items(campaign, 1, human_feedback="")
    (person,) = annotators(1)
    assert assignment_next(campaign=campaign, annotator=person) is None


def test_it_never_asks_the_writer_to_judge_their_own_feedback(make_campaign, make_items, annotators):
    campaign = make_campaign()
    writer, other = annotators(2)
    make_items(campaign, 1, human_feedback_author=writer)
    assert assignment_next(campaign=campaign, annotator=writer) is None
    assert assignment_next(campaign=campaign, annotator=other) is not None


@pytest.mark.parametrize("status, deadline_days", [(Campaign.Status.DRAFT, None), (Campaign.Status.CLOSED, None),
                                                    (Campaign.Status.OPEN, -1)])
def test_it_hands_out_nothing_unless_the_campaign_is_open(make_campaign, make_items, annotators, status,
                                                          deadline_days):
    deadline = timezone.now() + timedelta(days=deadline_days) if deadline_days else None
    campaign = make_campaign(status=status, deadline=deadline)
    make_items(campaign, 1)
    (person,) = annotators(1)
    assert assignment_next(campaign=campaign, annotator=person) is None


def test_it_reclaims_abandoned_assignments_after_the_timeout(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=1, assignment_timeout_minutes=30)
    make_items(campaign, 1)
    idle, eager = annotators(2)
    abandoned = assignment_next(campaign=campaign, annotator=idle)
    assert assignment_next(campaign=campaign, annotator=eager) is None
    Assignment.objects.filter(pk=abandoned.pk).update(assigned_at=timezone.now() - timedelta(minutes=31))
    taken_over = assignment_next(campaign=campaign, annotator=eager)
    assert taken_over is not None and taken_over.item_id == abandoned.item_id
    abandoned.refresh_from_db()
    assert abandoned.status == Assignment.Status.EXPIRED


def test_it_keeps_an_assignment_that_was_opened_recently(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=1, assignment_timeout_minutes=30)
    make_items(campaign, 1)
    reader, eager = annotators(2)
    held = assignment_next(campaign=campaign, annotator=reader)
    Assignment.objects.filter(pk=held.pk).update(assigned_at=timezone.now() - timedelta(minutes=40),
                                                 opened_at=timezone.now() - timedelta(minutes=5))
    assert assignment_next(campaign=campaign, annotator=eager) is None


def _concurrently(workers: int, job):
    """Run job(index) in `workers` threads released together; each uses its own connection."""
    barrier, results, errors = threading.Barrier(workers), [None] * workers, []

    def run(index):
        try:
            barrier.wait()
            results[index] = job(index)
        except Exception as error:  # surfaced by the assertion below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return results


@pytest.mark.django_db(transaction=True)
def test_it_gives_the_last_slot_to_exactly_one_of_two_simultaneous_annotators(make_campaign, make_items,
                                                                               annotators):
    campaign = make_campaign(annotators_per_item=1)
    make_items(campaign, 1)
    people = annotators(2)
    results = _concurrently(2, lambda index: assignment_next(campaign=campaign, annotator=people[index]))
    assert sum(result is not None for result in results) == 1
    assert Assignment.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_it_keeps_every_invariant_under_concurrent_requests(make_campaign, make_items, annotators):
    campaign = make_campaign(annotators_per_item=3)
    items = make_items(campaign, 4)
    people = annotators(6)

    def first_round(index):
        return assignment_next(campaign=campaign, annotator=people[index])

    opened = _concurrently(6, first_round)
    assert all(opened)  # 12 slots, 6 people: nobody is turned away
    counts = _live_counts(campaign)
    assert max(counts.values()) - min(counts.get(item.pk, 0) for item in items) <= 1

    def work_until_empty(index):
        judged = 0
        while (assignment := assignment_next(campaign=campaign, annotator=people[index])) is not None:
            _judge(assignment)
            judged += 1
        return judged

    assert sum(_concurrently(6, work_until_empty)) == 12
    for item in Item.objects.filter(campaign=campaign):
        judges = list(item.assignments.values_list("annotator_id", flat=True))
        assert len(judges) == 3 and len(set(judges)) == 3


@pytest.mark.django_db(transaction=True)
def test_it_hands_one_annotator_a_single_assignment_on_a_double_click(make_campaign, make_items, annotators):
    campaign = make_campaign()
    make_items(campaign, 3)
    (person,) = annotators(1)
    results = _concurrently(4, lambda index: assignment_next(campaign=campaign, annotator=person))
    assert len({result.pk for result in results}) == 1
    assert Assignment.objects.filter(annotator=person).count() == 1
